import { MigrationInterface, QueryRunner } from 'typeorm';

/** Customers' own output buckets (the integer `storage_credential_id` of docs/api-contract.md#images), secrets sealed with AES-256-GCM. */
export class StorageCredentials1763900000000 implements MigrationInterface {
  name = 'StorageCredentials1763900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE storage_credentials (
        id serial PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        name text NOT NULL,
        provider text NOT NULL CHECK (provider IN ('s3')),
        endpoint text,
        region text NOT NULL,
        bucket text NOT NULL,
        key_prefix text NOT NULL DEFAULT '',
        access_key_id text NOT NULL,
        secret_ciphertext bytea NOT NULL,
        status text NOT NULL DEFAULT 'unverified' CHECK (status IN ('unverified', 'verified', 'failed')),
        status_message text,
        verified_at timestamptz,
        created_at timestamptz NOT NULL DEFAULT now(),
        deleted_at timestamptz
      );
      CREATE INDEX storage_credentials_workspace ON storage_credentials (workspace_id) WHERE deleted_at IS NULL;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE storage_credentials`);
  }
}
