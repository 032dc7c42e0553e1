import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 39: a deployment's scaling policy, its SLO and scale to zero (deployment.entity.ts says
 * what each column means). Existing deployments keep the `concurrency` policy and never scale to zero.
 */
export class AutoscalingSlo1765800000000 implements MigrationInterface {
  name = 'AutoscalingSlo1765800000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments
        ADD COLUMN scaling_policy text NOT NULL DEFAULT 'concurrency',
        ADD COLUMN slo_ttft_p95_ms integer,
        ADD COLUMN slo_tpot_p95_ms integer,
        ADD COLUMN slo_queue_wait_p95_ms integer,
        ADD COLUMN scale_to_zero_after_seconds integer,
        ADD COLUMN cold_start_queue_limit integer NOT NULL DEFAULT 100
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployments
        DROP COLUMN scaling_policy, DROP COLUMN slo_ttft_p95_ms, DROP COLUMN slo_tpot_p95_ms,
        DROP COLUMN slo_queue_wait_p95_ms, DROP COLUMN scale_to_zero_after_seconds, DROP COLUMN cold_start_queue_limit
    `);
  }
}
