import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Work that outlives its HTTP request keeps the request's W3C trace context (`traceparent`,
 * docs/tracing.md): an async image or video record, a batch, a background response, and each
 * webhook event (copied from the record it is about). Its run, on any server and however much
 * later, and the delivery of its webhook then continue the submission's trace. Null where the
 * submission was not traced (tracing off), and on every row written before this migration.
 */
export class TraceContext1765630000000 implements MigrationInterface {
  name = 'TraceContext1765630000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE request_records ADD COLUMN traceparent text;
      ALTER TABLE batches ADD COLUMN traceparent text;
      ALTER TABLE responses ADD COLUMN traceparent text;
      ALTER TABLE webhook_events ADD COLUMN traceparent text;
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE webhook_events DROP COLUMN traceparent;
      ALTER TABLE responses DROP COLUMN traceparent;
      ALTER TABLE batches DROP COLUMN traceparent;
      ALTER TABLE request_records DROP COLUMN traceparent;
    `);
  }
}
