import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The Responses API's state (control-plane/responses): one row per stored response, scoped to
 * its workspace (deleting it deletes its responses) and its deployment, or for a guest's
 * response the shared model (`shared/<model-id>`): `deployment_id` therefore has no foreign
 * key (deployments are never deleted, only marked; retention bounds what they leave). Looked
 * up by primary key only; `expires_at` is the retention sweep's index. Batches may name
 * `/v1/responses` as their endpoint.
 */
export class Responses1765300000000 implements MigrationInterface {
  name = 'Responses1765300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE responses (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        deployment_id text NOT NULL,
        api_key_id text NOT NULL,
        model text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled')),
        background boolean NOT NULL DEFAULT false,
        previous_response_id text,
        settings jsonb NOT NULL,
        history jsonb NOT NULL DEFAULT '[]',
        input jsonb NOT NULL,
        output jsonb NOT NULL DEFAULT '[]',
        usage jsonb,
        error jsonb,
        incomplete_details jsonb,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        completed_at timestamptz,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX responses_expires_at ON responses (expires_at);
      CREATE INDEX responses_workspace ON responses (workspace_id);

      ALTER TABLE batches DROP CONSTRAINT batches_endpoint_check;
      ALTER TABLE batches ADD CONSTRAINT batches_endpoint_check CHECK (endpoint IN ('/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'));
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DROP TABLE responses;
      DELETE FROM batches WHERE endpoint = '/v1/responses';
      ALTER TABLE batches DROP CONSTRAINT batches_endpoint_check;
      ALTER TABLE batches ADD CONSTRAINT batches_endpoint_check CHECK (endpoint IN ('/v1/chat/completions', '/v1/completions', '/v1/embeddings'));
    `);
  }
}
