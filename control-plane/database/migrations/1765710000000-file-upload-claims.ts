import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `file_upload_claims`: the one use of each signed upload link (the console's adapter weights
 * upload, control-plane/batches/file-uploads.ts), keyed by the file id the link names.
 */
export class FileUploadClaims1765710000000 implements MigrationInterface {
  name = 'FileUploadClaims1765710000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE file_upload_claims (
        file_id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        storage_credential_id integer,
        object_key text NOT NULL,
        expires_at timestamptz NOT NULL,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      );
      CREATE INDEX file_upload_claims_expiry ON file_upload_claims (expires_at);
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE file_upload_claims');
  }
}
