import type { DataSource, EntityManager } from 'typeorm';
import type { StoredQuotas } from '../budgets/stored-quota';
import type { BatchBudget } from './batch-service';
import { TERMINAL_BATCH_STATUSES } from './batch.entities';

const ENDED = TERMINAL_BATCH_STATUSES.map((status) => `'${status}'`).join(', ');

/**
 * The Batch API's share of the tenant budget: the files a workspace keeps (`stored_files`),
 * their bytes (`stored_bytes`: its uploads and its batches' outputs, until deleted) and its
 * batches not yet ended (`active_batches`). There were no quotas: one workspace could fill the
 * object store and the batch tables. `admit…` runs before anything is written (a refused 100 MB
 * upload is not stored first), `hold…` inside the transaction that inserts the row, under the
 * workspace's lock, so parallel uploads or creates cannot all pass one count. Outputs a batch
 * writes are counted, never refused: a running batch is not broken by its own results.
 */
export class BatchQuota implements BatchBudget {
  constructor(private readonly dataSource: DataSource, private readonly quotas: StoredQuotas) {}

  async admitFile(workspaceId: string, bytes: number): Promise<void> {
    const { files, stored } = await this.filesOf(this.dataSource.manager, workspaceId);
    const refusal = this.quotas.refusal('stored_files', 'workspace', workspaceId, files) ?? this.quotas.refusal('stored_bytes', 'workspace', workspaceId, stored, bytes);
    if (refusal) throw refusal;
  }

  async admitBatch(workspaceId: string): Promise<void> {
    const refusal = this.quotas.refusal('active_batches', 'workspace', workspaceId, await this.activeBatches(this.dataSource.manager, workspaceId));
    if (refusal) throw refusal;
  }

  /** Inside the upload's insert: the file and its bytes fit, counted under the workspace's locks. */
  async holdFile(manager: EntityManager, workspaceId: string, bytes: number): Promise<void> {
    await this.quotas.hold(manager, 'stored_files', workspaceId, async (locked) => (await this.filesOf(locked, workspaceId)).files);
    await this.quotas.hold(manager, 'stored_bytes', workspaceId, async (locked) => (await this.filesOf(locked, workspaceId)).stored, bytes);
  }

  /** Inside the batch's insert. */
  async holdBatch(manager: EntityManager, workspaceId: string): Promise<void> {
    await this.quotas.hold(manager, 'active_batches', workspaceId, (locked) => this.activeBatches(locked, workspaceId));
  }

  private async filesOf(manager: EntityManager, workspaceId: string): Promise<{ files: number; stored: number }> {
    const [row] = await manager.query(
      'SELECT count(*)::int AS files, coalesce(sum(bytes), 0)::bigint AS stored FROM batch_files WHERE workspace_id = $1 AND deleted_at IS NULL', [workspaceId]);
    return { files: Number(row.files), stored: Number(row.stored) };
  }

  private async activeBatches(manager: EntityManager, workspaceId: string): Promise<number> {
    const [row] = await manager.query(`SELECT count(*)::int AS count FROM batches WHERE workspace_id = $1 AND status NOT IN (${ENDED})`, [workspaceId]);
    return Number(row.count);
  }
}
