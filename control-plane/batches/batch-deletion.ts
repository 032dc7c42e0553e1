import type { DataSource } from 'typeorm';
import type { DeploymentBatches } from '../deployments/deployment.service';
import type { WorkspaceBatches } from '../workspaces/workspace-admin';
import type { BatchFilePurge } from './batch-file-purge';
import type { BatchFiles } from './batch-files';
import type { BatchStore } from './batch-store';

/**
 * What goes with a deleted deployment or workspace: its batches are cancelled, as a user's
 * cancel does (`cancelling`, their running lines stopped, `cancelled` once finalized, their
 * webhook event), and its files are deleted, rows and bytes. An input file that a cancelling
 * batch still reads goes once that batch ends (batch-file-purge.ts). The output and error
 * files of a batch that ends after its deployment was deleted are not written
 * (batch-finalizer.ts): they would be deleted with the rest.
 */
export class BatchDeletion implements DeploymentBatches, WorkspaceBatches {
  constructor(
    private readonly dataSource: DataSource,
    private readonly store: Pick<BatchStore, 'announce'>,
    private readonly files: Pick<BatchFiles, 'deleteAll'>,
    private readonly purge: Pick<BatchFilePurge, 'purge'>,
  ) {}

  async deploymentDeleted(workspaceId: string, deploymentId: string): Promise<void> {
    await this.cancel('workspace_id = $1 AND deployment_id = $2', [workspaceId, deploymentId]);
    await this.files.deleteAll({ workspaceId, deploymentId });
    await this.purge.purge({ workspaceId, deploymentId });
  }

  async workspaceDeleted(workspaceId: string): Promise<void> {
    await this.cancel('workspace_id = $1', [workspaceId]);
    await this.files.deleteAll({ workspaceId });
    await this.purge.purge({ workspaceId });
  }

  /**
   * The sweep's catch-all for a deletion that stopped half-way (its server died after the
   * deployment turned Deleted): the batches and files of deleted deployments and workspaces
   * that are still open. `files` also looks at files (a scan of the table, so not every sweep).
   */
  async finishDeletions(files: boolean): Promise<void> {
    const deleted = `(deployment_id IN (SELECT id FROM deployments WHERE status = 'Deleted')
      OR workspace_id IN (SELECT id FROM workspaces WHERE deleted_at IS NOT NULL))`;
    await this.cancel(deleted, []);
    if (files) await this.dataSource.query(`UPDATE batch_files SET deleted_at = clock_timestamp() WHERE deleted_at IS NULL AND ${deleted}`);
  }

  private async cancel(condition: string, params: unknown[]): Promise<void> {
    const result: unknown[] = await this.dataSource.query(`
      UPDATE batches SET status = 'cancelling', end_status = 'cancelled', cancelling_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
      WHERE status IN ('validating', 'in_progress') AND ${condition} RETURNING id`, params);
    // `UPDATE … RETURNING` through `query` answers [rows, count] on PostgreSQL.
    const rows = (Array.isArray(result[0]) ? result[0] : result) as Array<{ id: string }>;
    // Every server hears of it (event and NOTIFY) and stops the lines it runs, as for a user's cancel.
    for (const { id } of rows) await this.store.announce(id);
  }
}
