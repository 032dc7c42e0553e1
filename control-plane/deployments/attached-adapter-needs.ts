import type { DataSource } from 'typeorm';

/** An adapter attached to a deployment, as its LoRA settings must fit it. */
export interface AttachedAdapterNeed {
  readonly name: string;
  readonly rank: number;
}

/**
 * The adapters attached to a deployment, largest rank first: lowering its `maxLoraRank` below
 * one of them, or its `maxLoras` to 0, would fail every load of it (docs/adapters.md#attaching),
 * so the change is refused naming it. Read here, by its tables, rather than through adapters/
 * (which builds on deployments/).
 */
export class AttachedAdapterNeeds {
  constructor(private readonly dataSource: DataSource) {}

  async of(deploymentId: string): Promise<AttachedAdapterNeed[]> {
    const rows: Array<{ name: string; rank: number }> = await this.dataSource.query(`
      SELECT a.name, a.rank FROM adapter_attachments t JOIN adapters a ON a.id = t.adapter_id
      WHERE t.deployment_id = $1 ORDER BY a.rank DESC, a.name LIMIT 1000`, [deploymentId]);
    return rows.map((row) => ({ name: row.name, rank: Number(row.rank) }));
  }
}
