import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Issue 39, what the console charts of autoscaling:
 * - `scaling_decisions` names the policy that decided, the input that moved it, and the arrival
 *   rate it saw and forecast (null on older rows: the `concurrency` policy, before forecasts).
 * - `deployment_metrics_minutes` counts each minute's owner arrivals, and the requests judged
 *   against the deployment's SLO (streamed text by its TTFT target, media by its queue-wait
 *   target) and how many of those met it, so attainment adds up over servers and minutes.
 */
export class AutoscalingHistory1765820000000 implements MigrationInterface {
  name = 'AutoscalingHistory1765820000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE scaling_decisions
        ADD COLUMN policy text,
        ADD COLUMN moved_by text,
        ADD COLUMN forecast_arrivals_per_second double precision,
        ADD COLUMN arrivals_per_second double precision;
      ALTER TABLE deployment_metrics_minutes
        ADD COLUMN arrivals integer NOT NULL DEFAULT 0,
        ADD COLUMN slo_requests integer NOT NULL DEFAULT 0,
        ADD COLUMN within_slo integer NOT NULL DEFAULT 0
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE deployment_metrics_minutes DROP COLUMN arrivals, DROP COLUMN slo_requests, DROP COLUMN within_slo;
      ALTER TABLE scaling_decisions DROP COLUMN policy, DROP COLUMN moved_by, DROP COLUMN forecast_arrivals_per_second, DROP COLUMN arrivals_per_second
    `);
  }
}
