import { MigrationInterface, QueryRunner } from 'typeorm';

/** Request records (image and video jobs) and a deployment's default output storage. */
export class RequestRecords1764000000000 implements MigrationInterface {
  name = 'RequestRecords1764000000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE request_records (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
        api_key_id text NOT NULL,
        modality text NOT NULL CHECK (modality IN ('image', 'video')),
        kind text NOT NULL CHECK (kind IN ('image-generation', 'image-edit', 'video-generation')),
        model_id text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
        sync boolean NOT NULL DEFAULT false,
        params jsonb NOT NULL,
        inputs jsonb NOT NULL DEFAULT '[]',
        response_format text NOT NULL CHECK (response_format IN ('url', 'b64_json')),
        output_count integer NOT NULL CHECK (output_count >= 1),
        storage_credential_id integer,
        storage_provider text,
        output_bucket text,
        output_object_key text,
        output_keys text[] NOT NULL DEFAULT '{}',
        webhook_url text,
        idempotency_key text,
        request_hash text,
        error_code text,
        error_message text,
        progress integer NOT NULL DEFAULT 0 CHECK (progress BETWEEN 0 AND 100),
        estimated_seconds integer NOT NULL,
        replica_id text,
        lease_owner text,
        lease_expires_at timestamptz,
        deadline_at timestamptz,
        billed_gpu_seconds numeric(12,3) NOT NULL DEFAULT 0,
        queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        started_at timestamptz,
        completed_at timestamptz,
        outputs_expire_at timestamptz,
        outputs_deleted_at timestamptz,
        CHECK (status NOT IN ('failed', 'canceled') OR billed_gpu_seconds = 0)
      );
      -- The claim: oldest queued job of a deployment, FOR UPDATE SKIP LOCKED.
      CREATE INDEX request_records_queue ON request_records (deployment_id, queued_at) WHERE status = 'queued';
      CREATE INDEX request_records_listing ON request_records (deployment_id, queued_at DESC, id DESC);
      CREATE INDEX request_records_running ON request_records (lease_expires_at) WHERE status = 'running';
      CREATE INDEX request_records_retention ON request_records (outputs_expire_at) WHERE outputs_deleted_at IS NULL AND outputs_expire_at IS NOT NULL;
      CREATE UNIQUE INDEX request_records_idempotency ON request_records (workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
      ALTER TABLE deployments ADD COLUMN storage_credential_id integer;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE deployments DROP COLUMN storage_credential_id; DROP TABLE request_records;`);
  }
}
