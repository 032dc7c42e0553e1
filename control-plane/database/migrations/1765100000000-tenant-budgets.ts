import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-workspace limits of the tenant budget (control-plane/budgets). Local capacity (agent
 * processes on the server's own host) becomes the operator's to grant: so that an upgrade stops
 * nothing that runs, the first workspace (the `dev` one of a first start) and every workspace
 * with a local deployment now keep it, without a per-workspace limit (2147483647).
 */
export class TenantBudgets1765100000000 implements MigrationInterface {
  name = 'TenantBudgets1765100000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE workspace_budgets (
        workspace_id text NOT NULL REFERENCES workspaces(id),
        budget text NOT NULL,
        scope text NOT NULL CHECK (scope IN ('key', 'workspace')),
        limit_value bigint NOT NULL CHECK (limit_value >= 0),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (workspace_id, budget, scope)
      );
      INSERT INTO workspace_budgets (workspace_id, budget, scope, limit_value)
        SELECT id, 'local_replicas', 'workspace', 2147483647 FROM workspaces
        WHERE id = (SELECT id FROM workspaces ORDER BY created_at, id LIMIT 1)
           OR id IN (SELECT workspace_id FROM deployments WHERE provider = 'local' AND status <> 'Deleted')
        ON CONFLICT DO NOTHING;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('DROP TABLE workspace_budgets');
  }
}
