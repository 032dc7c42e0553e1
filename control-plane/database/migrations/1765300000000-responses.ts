import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The Responses API's state (control-plane/responses): one row per stored response, scoped to
 * its workspace and deployment (deleting either deletes its responses). Looked up by primary
 * key only; `expires_at` is the retention sweep's index.
 */
export class Responses1765300000000 implements MigrationInterface {
  name = 'Responses1765300000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE responses (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        deployment_id text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
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
      CREATE INDEX responses_deployment ON responses (deployment_id);
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE responses');
  }
}
