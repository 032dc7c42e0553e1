import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 39, cold starts: each replica keeps how its start-up went (its phases, and why it never
 * became ready when it failed to start; when it did is `started_at`, its first Running), and each
 * static host the models its weights cache holds (its agent's Hello says), which placement prefers.
 */
export class ColdStarts1765810000000 implements MigrationInterface {
  name = 'ColdStarts1765810000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE replicas
        ADD COLUMN startup_phases jsonb NOT NULL DEFAULT '[]',
        ADD COLUMN start_failure text CHECK (start_failure IN ('deadline', 'exited', 'provider_failed'))
    `);
    // The start-failure back-off reads a deployment's failures since its last ready replica.
    await queryRunner.query(`CREATE INDEX replicas_start_failures ON replicas (deployment_id, terminated_at) WHERE start_failure IS NOT NULL`);
    await queryRunner.query(`ALTER TABLE gpu_hosts ADD COLUMN cached_models jsonb NOT NULL DEFAULT '[]'`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE gpu_hosts DROP COLUMN cached_models');
    await queryRunner.query('DROP INDEX replicas_start_failures');
    await queryRunner.query('ALTER TABLE replicas DROP COLUMN startup_phases, DROP COLUMN start_failure');
  }
}
