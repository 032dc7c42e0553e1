import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 37's history (docs/observability-history.md):
 *
 * - `deployment_metrics_minutes`: one row per deployment and minute, summed over servers.
 *   Each server adds what it counted (upsert with addition), so the counts and the latency
 *   histograms (fixed log-spaced buckets, metrics-history/latency-buckets.ts) are exact
 *   across servers; `replicas` is a sample of the replica table that every server takes
 *   alike, merged with GREATEST. No foreign key: rows outlive nothing (retention deletes them)
 *   and a deployment is only ever marked deleted.
 * - `request_log`: one row per settled text request, in the workspace of the key that made it
 *   (a guest's row names its shared model, never the owner's deployment). Bodies only when
 *   the workspace stores them (`workspaces.store_request_bodies`, off by default).
 */
export class ObservabilityHistory1765640000000 implements MigrationInterface {
  name = 'ObservabilityHistory1765640000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE deployment_metrics_minutes (
        deployment_id text NOT NULL,
        minute timestamptz NOT NULL,
        requests integer NOT NULL DEFAULT 0,
        errors integer NOT NULL DEFAULT 0,
        tokens_in bigint NOT NULL DEFAULT 0,
        tokens_out bigint NOT NULL DEFAULT 0,
        latency_buckets integer[] NOT NULL DEFAULT '{}',
        ttft_buckets integer[] NOT NULL DEFAULT '{}',
        replicas integer NOT NULL DEFAULT 0,
        gpu_cost_usd double precision NOT NULL DEFAULT 0,
        PRIMARY KEY (deployment_id, minute)
      );
      CREATE INDEX deployment_metrics_minutes_minute ON deployment_metrics_minutes (minute);

      CREATE TABLE request_log (
        seq bigserial PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        request_id text,
        api_key_id text NOT NULL,
        deployment_id text,
        shared_model text,
        replica_id text,
        batch_id text,
        model text NOT NULL,
        endpoint text NOT NULL,
        stream boolean NOT NULL,
        outcome text NOT NULL,
        error_code text,
        finish_reason text,
        prompt_tokens integer NOT NULL,
        completion_tokens integer NOT NULL,
        cached_tokens integer NOT NULL,
        started_at timestamptz NOT NULL,
        latency_ms double precision NOT NULL,
        ttft_ms double precision,
        trace_id text,
        phases jsonb,
        request_body text,
        request_body_truncated boolean NOT NULL DEFAULT false,
        response_body text,
        response_body_truncated boolean NOT NULL DEFAULT false,
        CONSTRAINT request_log_served_by CHECK (deployment_id IS NOT NULL OR shared_model IS NOT NULL)
      );
      CREATE INDEX request_log_newest ON request_log (workspace_id, started_at DESC, seq DESC);
      CREATE INDEX request_log_deployment ON request_log (workspace_id, deployment_id, started_at DESC, seq DESC);
      CREATE INDEX request_log_request_id ON request_log (workspace_id, request_id);
      CREATE INDEX request_log_trace_id ON request_log (workspace_id, trace_id) WHERE trace_id IS NOT NULL;
      CREATE INDEX request_log_started_at ON request_log (started_at);

      ALTER TABLE workspaces ADD COLUMN store_request_bodies boolean NOT NULL DEFAULT false;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE workspaces DROP COLUMN store_request_bodies;
      DROP TABLE request_log;
      DROP TABLE deployment_metrics_minutes;
    `);
  }
}
