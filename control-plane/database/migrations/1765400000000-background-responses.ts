import { MigrationInterface, QueryRunner } from 'typeorm';

const OLD_EVENTS = `'request.completed', 'request.failed', 'request.canceled', 'webhook.test', 'batch.completed', 'batch.failed', 'batch.expired', 'batch.cancelled'`;
const RESPONSE_EVENTS = `'response.completed', 'response.failed', 'response.cancelled', 'response.incomplete'`;

/**
 * Background responses (`background: true`): the queue columns of the responses table. A
 * server runs a queued or in-progress background response while it holds its lease
 * (`lease_owner`, renewed by the runner's sweep); a row whose lease lapsed (its server died) is
 * run again by any server, at most `RESPONSES_BACKGROUND_ATTEMPTS` times (`attempts`). `request`
 * holds the parsed create request, so a server that never saw it can run it. The partial index
 * is what the sweep reads. Their terminal events are webhook events.
 */
export class BackgroundResponses1765400000000 implements MigrationInterface {
  name = 'BackgroundResponses1765400000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE responses ADD COLUMN request jsonb, ADD COLUMN lease_owner text, ADD COLUMN lease_expires_at timestamptz,
        ADD COLUMN attempts integer NOT NULL DEFAULT 0;
      CREATE INDEX responses_background_open ON responses (lease_expires_at) WHERE background AND status IN ('queued', 'in_progress');
      ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
      ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN (${OLD_EVENTS}, ${RESPONSE_EVENTS}));
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DELETE FROM webhook_events WHERE type IN (${RESPONSE_EVENTS});
      ALTER TABLE webhook_events DROP CONSTRAINT webhook_events_type_check;
      ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_type_check CHECK (type IN (${OLD_EVENTS}));
      DROP INDEX responses_background_open;
      ALTER TABLE responses DROP COLUMN request, DROP COLUMN lease_owner, DROP COLUMN lease_expires_at, DROP COLUMN attempts;
    `);
  }
}
