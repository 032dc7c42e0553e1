import type { DataSource } from 'typeorm';

/**
 * What a person reads instead of an id in a report: a deployment's model and slug, a key's name
 * and prefix. Looked up only among the workspace's own rows, deleted deployments and revoked
 * keys included (their usage and money stay in the reports).
 */
export class RecordLabels {
  constructor(private readonly dataSource: DataSource) {}

  /** `meta-llama/Llama-3.1-8B-Instruct (llama-3-1-8b-instruct-3f2a1c)`, with `, deleted` when it is. */
  async deployments(workspaceId: string, ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows: Array<{ id: string; model_id: string; slug: string; status: string }> = await this.dataSource.query(
      'SELECT id, model_id, slug, status FROM deployments WHERE workspace_id = $1 AND id = ANY($2)', [workspaceId, [...new Set(ids)]]);
    return new Map(rows.map((row) => [row.id, `${row.model_id} (${row.slug}${row.status === 'Deleted' ? ', deleted' : ''})`]));
  }

  /** `ci pipeline (mk-Ab3…)`, with `, revoked` when it is. */
  async apiKeys(workspaceId: string, ids: readonly string[]): Promise<Map<string, string>> {
    if (ids.length === 0) return new Map();
    const rows: Array<{ id: string; name: string; display_prefix: string; revoked_at: Date | null }> = await this.dataSource.query(
      'SELECT id, name, display_prefix, revoked_at FROM api_keys WHERE workspace_id = $1 AND id = ANY($2)', [workspaceId, [...new Set(ids)]]);
    return new Map(rows.map((row) => [row.id, `${row.name} (${row.display_prefix}…${row.revoked_at ? ', revoked' : ''})`]));
  }

  /** An adapter's name (`support-bot`), `(deleted adapter)` once it is gone, `base model` for requests without one (key ''). */
  async adapters(workspaceId: string, ids: readonly string[]): Promise<Map<string, string>> {
    const named = ids.filter((id) => id !== '');
    const rows: Array<{ id: string; name: string }> = named.length === 0 ? [] : await this.dataSource.query(
      'SELECT id, name FROM adapters WHERE workspace_id = $1 AND id = ANY($2)', [workspaceId, [...new Set(named)]]);
    const labels = new Map(rows.map((row) => [row.id, row.name]));
    for (const id of named) if (!labels.has(id)) labels.set(id, '(deleted adapter)');
    if (ids.includes('')) labels.set('', 'base model');
    return labels;
  }
}
