import type { Logger } from 'pino';
import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import type { BatchFiles } from './batch-files';

/** Files deleted per statement (a sweep takes this many; a deletion goes round until none is left). */
const PURGE_PAGE = 100;

/** A batch that may still read its input file. */
const UNFINISHED = `'validating', 'in_progress', 'finalizing', 'cancelling'`;

/** Which deleted files to look at: some files, a deployment's or workspace's, or (no scope) any. */
export type PurgeScope = { fileIds: string[] } | { workspaceId: string; deploymentId?: string } | Record<string, never>;

/**
 * The second step of deleting a file: its row and its object go once it is marked deleted
 * (`DELETE /files/{id}`, its deployment or workspace deleted) and no unfinished batch reads it.
 * Run right after a deletion, after a batch ends (its input may be waiting), and by the sweep.
 * Object first, then the row: a server that dies between leaves a row the next purge finishes.
 */
export class BatchFilePurge {
  constructor(
    private readonly dataSource: DataSource,
    private readonly files: Pick<BatchFiles, 'removeObjects'>,
    private readonly logger: Logger,
  ) {}

  /**
   * Purges the scope's deleted files: all of them for a scope (a deletion), one page for no
   * scope (the sweep takes the rest next time). Returns how many went.
   */
  async purge(scope: PurgeScope = {}): Promise<number> {
    let purged = 0;
    for (;;) {
      const page = await this.purgePage(scope);
      purged += page.purged;
      // A page whose objects could not be removed would come back the same: the sweep retries it.
      if (page.seen < PURGE_PAGE || page.purged === 0 || Object.keys(scope).length === 0) return purged;
    }
  }

  private async purgePage(scope: PurgeScope): Promise<{ seen: number; purged: number }> {
    const [condition, params] = scopeCondition(scope);
    const rows: Array<{ id: string; workspace_id: string; storage_credential_id: number | null; object_key: string }> = await this.dataSource.query(`
      SELECT f.id, f.workspace_id, f.storage_credential_id, f.object_key FROM batch_files f
      WHERE f.deleted_at IS NOT NULL ${condition}
        AND NOT EXISTS (SELECT 1 FROM batches b WHERE b.input_file_id = f.id AND b.status IN (${UNFINISHED}))
      ORDER BY f.deleted_at, f.id LIMIT ${PURGE_PAGE}`, params);
    let purged = 0;
    for (const row of rows) {
      const file = { workspaceId: row.workspace_id, storageCredentialId: row.storage_credential_id, objectKey: row.object_key };
      try {
        await this.files.removeObjects([file]);
      } catch (error) {
        // A customer bucket we can no longer reach (its credential deleted or unverified) holds
        // nothing of ours to remove; anything else is tried again by the next purge.
        if (!(error instanceof AppError && error.code.startsWith('storage_credential_'))) {
          this.logger.warn({ err: error, fileId: row.id }, "could not remove a deleted file's object; the next sweep tries again");
          continue;
        }
      }
      await this.dataSource.query('DELETE FROM batch_files WHERE id = $1 AND deleted_at IS NOT NULL', [row.id]);
      purged++;
    }
    return { seen: rows.length, purged };
  }
}

function scopeCondition(scope: PurgeScope): [string, unknown[]] {
  if ('fileIds' in scope) return ['AND f.id = ANY($1)', [scope.fileIds]];
  if ('workspaceId' in scope) {
    return scope.deploymentId ? ['AND f.workspace_id = $1 AND f.deployment_id = $2', [scope.workspaceId, scope.deploymentId]] : ['AND f.workspace_id = $1', [scope.workspaceId]];
  }
  return ['', []];
}
