import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A request log entry's phases move from a jsonb object to `phase_us`, five bigints: admitted,
 * dispatched, started, first token and ended, each in µs after `started_at` (NULL for a step
 * the request never reached). PostgreSQL spent about 7 µs a row building the jsonb (each value a
 * numeric, the object's keys) and under 1 µs on the array; the log is written once per request
 * (bench/results/2026-11-30-request-log-rows.md). Bigints: a batch line's steps can come hours
 * after its arrival, past what 32 bits of µs hold. The jsonb column stays for entries written
 * before (readers take whichever is set) and ages out with them; no rewrite of a table that
 * may hold a month of requests.
 */
export class RequestLogPhaseArray1765840000000 implements MigrationInterface {
  name = 'RequestLogPhaseArray1765840000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query('ALTER TABLE request_log ADD COLUMN phase_us bigint[]');
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      UPDATE request_log SET phases = jsonb_strip_nulls(jsonb_build_object('admittedMs', phase_us[1]::float8 / 1000, 'dispatchedMs', phase_us[2]::float8 / 1000,
        'startedMs', phase_us[3]::float8 / 1000, 'firstTokenMs', phase_us[4]::float8 / 1000, 'endedMs', phase_us[5]::float8 / 1000))
      WHERE phase_us IS NOT NULL`);
    await queryRunner.query('ALTER TABLE request_log DROP COLUMN phase_us');
  }
}
