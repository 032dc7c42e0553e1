/**
 * BatchStore.claimLines takes at most the lines asked for, whatever the planner's statistics
 * say. The first form of the claim (`UPDATE … WHERE line_index IN (SELECT … LIMIT n FOR UPDATE
 * SKIP LOCKED)`) claimed all 10,000 lines of a second batch once the table had been analyzed
 * after a first one ended (the planner re-ran the sub-select per row), and the server crashed
 * starting them. Reproduced here as it happened: a finished first batch, ANALYZE (what
 * autovacuum does a minute later), then a second batch of 10,000 pending lines.
 */
import type { DataSource } from 'typeorm';
import { BatchStore } from '../../control-plane/batches/batch-store';
import { openDatabase } from '../../control-plane/data-source';
import { ControlPlaneEvents } from '../../control-plane/events/control-plane-events';
import type { ClusterNotifier } from '../../control-plane/events/cluster-notifier';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

const LINES = 10_000;

describe('claiming batch lines', () => {
  let databaseUrl: string;
  let dataSource: DataSource;
  let store: BatchStore;

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    dataSource = await openDatabase(databaseUrl);
    const notifier = { publish: () => undefined, on: () => undefined } as unknown as Pick<ClusterNotifier, 'publish' | 'on'>;
    store = new BatchStore(dataSource, new ControlPlaneEvents(), notifier);
  }, 60_000);

  afterAll(async () => {
    await dataSource?.destroy();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  /** A batch row and its lines, written past the foreign keys (this test needs no workspace or deployment). */
  async function insertBatch(id: string, status: string, lineStatus: (index: number) => string): Promise<void> {
    const runner = dataSource.createQueryRunner();
    await runner.connect();
    try {
      await runner.query(`SET session_replication_role = replica`);
      await runner.query(`INSERT INTO batches (id, workspace_id, deployment_id, api_key_id, endpoint, model, input_file_id, completion_window, status, total_count, expires_at)
        VALUES ($1, 'ws', 'dep', 'key', '/v1/chat/completions', 'm', 'file-x', '24h', $2, $3, now() + interval '1 day')`, [id, status, LINES]);
      const statuses = Array.from({ length: LINES }, (_, index) => lineStatus(index));
      await runner.query(`INSERT INTO batch_lines (batch_id, line_index, custom_id, body, status, result)
        SELECT $1, i - 1, 'line-' || i, $2, s, CASE WHEN s IN ('succeeded', 'failed') THEN '{}' END
        FROM unnest($3::text[]) WITH ORDINALITY AS t(s, i)`, [id, 'x'.repeat(250), statuses]);
    } finally {
      await runner.query(`SET session_replication_role = DEFAULT`);
      await runner.release();
    }
  }

  it('takes the 4 lines asked for from a second batch after the table was analyzed with the first one finished', async () => {
    await insertBatch('batch_first', 'cancelled', (index) => (index < 720 ? 'succeeded' : 'failed'));
    await dataSource.query('ANALYZE batch_lines');
    await dataSource.query('ANALYZE batches');
    await insertBatch('batch_second', 'in_progress', () => 'pending');

    const claimed = await store.claimLines('batch_second', 'server-a', 30_000, 4);
    expect(claimed.map((line) => line.lineIndex)).toEqual([0, 1, 2, 3]);
    const [{ running }] = await dataSource.query(`SELECT count(*)::int AS running FROM batch_lines WHERE batch_id = 'batch_second' AND status = 'running'`);
    expect(running).toBe(4);
    // The next claim moves on in file order.
    expect((await store.claimLines('batch_second', 'server-b', 30_000, 3)).map((line) => line.lineIndex)).toEqual([4, 5, 6]);
  }, 60_000);
});
