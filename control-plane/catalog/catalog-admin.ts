import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import type { Catalog, CatalogModel } from './catalog';

/**
 * Operator changes to the catalog, kept in `catalog_models` so they survive restarts: models
 * registered beyond the checked-in file, and models switched off. A row with a spec registers
 * that model; `enabled` applies to any model, the file's included.
 */
export class CatalogAdmin {
  constructor(private readonly dataSource: DataSource, private readonly catalog: Catalog) {}

  /** Applies the stored changes (at start). */
  async load(): Promise<void> {
    const rows: Array<{ id: string; spec: Record<string, unknown> | null; enabled: boolean }> = await this.dataSource.query('SELECT id, spec, enabled FROM catalog_models');
    for (const row of rows) {
      if (row.spec && Object.keys(row.spec).length > 0) this.catalog.register(row.spec);
      if (this.catalog.find(row.id)) this.catalog.setEnabled(row.id, row.enabled);
    }
  }

  async register(spec: Record<string, unknown>): Promise<CatalogModel> {
    const model = this.catalog.register(spec);
    await this.dataSource.query(
      `INSERT INTO catalog_models (id, spec, enabled) VALUES ($1, $2, true) ON CONFLICT (id) DO UPDATE SET spec = EXCLUDED.spec, enabled = true`,
      [model.id, JSON.stringify(model)]);
    this.catalog.setEnabled(model.id, true);
    return model;
  }

  async setEnabled(id: string, enabled: boolean): Promise<CatalogModel> {
    const model = this.catalog.find(id);
    if (!model) throw new AppError('model_not_found', `model '${id}' is not in the catalog`, { param: 'id' });
    await this.dataSource.query(
      `INSERT INTO catalog_models (id, spec, enabled) VALUES ($1, '{}', $2) ON CONFLICT (id) DO UPDATE SET enabled = EXCLUDED.enabled`, [id, enabled]);
    this.catalog.setEnabled(id, enabled);
    return model;
  }
}
