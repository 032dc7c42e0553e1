import { MigrationInterface, QueryRunner } from 'typeorm';

const REQUEST_EVENTS = `'request.completed', 'request.failed', 'request.canceled', 'webhook.test'`;
const BATCH_EVENTS = `'batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled'`;

/**
 * The OpenAI Batch API: files of a deployment endpoint, batches, and one row per input line
 * (the runners of every server claim lines from here); batch tokens in usage records; the
 * batch webhook events.
 */
export class Batches1764900000000 implements MigrationInterface {
  name = 'Batches1764900000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE batch_files (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
        purpose text NOT NULL CHECK (purpose IN ('batch', 'batch_output')),
        filename text NOT NULL,
        bytes bigint NOT NULL CHECK (bytes >= 0),
        storage_credential_id integer,
        object_key text NOT NULL,
        batch_id text,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp()
      );
      CREATE INDEX batch_files_listing ON batch_files (deployment_id, created_at DESC, id DESC);

      CREATE TABLE batches (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
        api_key_id text NOT NULL,
        endpoint text NOT NULL CHECK (endpoint IN ('/v1/chat/completions', '/v1/completions', '/v1/embeddings')),
        model text NOT NULL,
        input_file_id text NOT NULL,
        completion_window text NOT NULL,
        status text NOT NULL CHECK (status IN ('validating', 'failed', 'in_progress', 'finalizing', 'completed', 'expired', 'cancelling', 'cancelled')),
        end_status text CHECK (end_status IN ('completed', 'expired', 'cancelled')),
        errors text,
        output_file_id text,
        error_file_id text,
        metadata text,
        total_count integer NOT NULL DEFAULT 0,
        completed_count integer NOT NULL DEFAULT 0,
        failed_count integer NOT NULL DEFAULT 0,
        input_tokens bigint NOT NULL DEFAULT 0,
        cached_tokens bigint NOT NULL DEFAULT 0,
        output_tokens bigint NOT NULL DEFAULT 0,
        total_tokens bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        expires_at timestamptz NOT NULL,
        in_progress_at timestamptz,
        finalizing_at timestamptz,
        completed_at timestamptz,
        failed_at timestamptz,
        expired_at timestamptz,
        cancelling_at timestamptz,
        cancelled_at timestamptz,
        lease_owner text,
        lease_expires_at timestamptz
      );
      CREATE INDEX batches_listing ON batches (deployment_id, created_at DESC, id DESC);
      CREATE INDEX batches_workspace ON batches (workspace_id, created_at DESC, id DESC);
      -- Work of the runners: batches not ended yet (few at any time).
      CREATE INDEX batches_open ON batches (status, created_at) WHERE status IN ('validating', 'in_progress', 'finalizing', 'cancelling');

      CREATE TABLE batch_lines (
        batch_id text NOT NULL REFERENCES batches(id) ON DELETE CASCADE,
        line_index integer NOT NULL,
        custom_id text NOT NULL,
        body text NOT NULL,
        status text NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
        attempts integer NOT NULL DEFAULT 0 CHECK (attempts BETWEEN 0 AND 2),
        claimed_by text,
        lease_expires_at timestamptz,
        result text,
        prompt_tokens integer NOT NULL DEFAULT 0,
        completion_tokens integer NOT NULL DEFAULT 0,
        total_tokens integer NOT NULL DEFAULT 0,
        finished_at timestamptz,
        PRIMARY KEY (batch_id, line_index),
        CHECK (status NOT IN ('succeeded', 'failed') OR result IS NOT NULL)
      );
      -- The claim: a batch's next pending lines in file order, FOR UPDATE SKIP LOCKED.
      CREATE INDEX batch_lines_pending ON batch_lines (batch_id, line_index) WHERE status = 'pending';
      CREATE INDEX batch_lines_running ON batch_lines (lease_expires_at) WHERE status = 'running';
      -- Whether a batch still has lines to run or running (it moves to finalizing when not).
      CREATE INDEX batch_lines_unfinished ON batch_lines (batch_id) WHERE status IN ('pending', 'running');

      ALTER TABLE usage_records ADD COLUMN batch_id text;
      CREATE INDEX usage_records_batch ON usage_records (batch_id) WHERE batch_id IS NOT NULL;

      ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
      ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN (${REQUEST_EVENTS}, ${BATCH_EVENTS}));
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DELETE FROM webhook_events WHERE type IN (${BATCH_EVENTS});
      ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
      ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN (${REQUEST_EVENTS}));
      DROP INDEX usage_records_batch;
      ALTER TABLE usage_records DROP COLUMN batch_id;
      DROP TABLE batch_lines, batches, batch_files;
    `);
  }
}
