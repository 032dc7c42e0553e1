import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Shared serving: whether an owner opens a deployment's idle capacity to guests and where the
 * rolling restart that turns on priority scheduling stands, and which replicas run with it.
 */
export class SharedServing1764400000000 implements MigrationInterface {
  name = 'SharedServing1764400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments ADD COLUMN share_idle_capacity boolean NOT NULL DEFAULT false;
      ALTER TABLE deployments ADD COLUMN sharing text NOT NULL DEFAULT 'not_shared'
        CHECK (sharing IN ('not_shared', 'activating', 'shared'));
      CREATE INDEX deployments_shared ON deployments (model_id) WHERE sharing = 'shared';
      ALTER TABLE replicas ADD COLUMN priority_scheduling boolean NOT NULL DEFAULT false;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE replicas DROP COLUMN priority_scheduling;
      DROP INDEX deployments_shared;
      ALTER TABLE deployments DROP COLUMN sharing;
      ALTER TABLE deployments DROP COLUMN share_idle_capacity;
    `);
  }
}
