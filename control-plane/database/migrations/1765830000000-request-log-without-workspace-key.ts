import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The request log's row per text request no longer checks its workspace against `workspaces`.
 * The foreign key's check was about a sixth of what PostgreSQL spends inserting a log row (a lookup and
 * a key-share lock per row: bench/results/2026-11-30-request-log-insert.md), on the one table
 * written once per request, and it bought nothing: the workspace id comes from the key that made
 * the request, and workspaces are never deleted, only marked deleted (`deleted_at`), so its
 * `ON DELETE CASCADE` never ran. Entries go by retention (REQUEST_LOG_RETENTION_DAYS) as before.
 */
export class RequestLogWithoutWorkspaceKey1765830000000 implements MigrationInterface {
  name = 'RequestLogWithoutWorkspaceKey1765830000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE request_log DROP CONSTRAINT IF EXISTS request_log_workspace_id_fkey');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE request_log ADD CONSTRAINT request_log_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE NOT VALID`);
  }
}
