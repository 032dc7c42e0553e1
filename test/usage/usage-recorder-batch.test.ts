import pino from 'pino';
import type { DataSource } from 'typeorm';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { UsageRecorder, type UsageInput } from '../../control-plane/usage/usage-recorder';
import { dataSourceForSuite } from '../support/test-database';

/** A batch is written as one JSON parameter: every column of every record must come back as it went in. */
describe('usage records written in a batch', () => {
  const database = dataSourceForSuite();
  const logger = pino({ level: 'silent' });

  it('keeps ids, nulls, booleans, counts and the millisecond of created_at for each of 500 records', async () => {
    const inputs: UsageInput[] = Array.from({ length: 500 }, (_, index) => ({
      workspaceId: `ws_${index % 3}`, apiKeyId: `key_${index}`, deploymentId: `dep_${index % 5}`, sharedModel: index % 6 === 0 ? 'shared/acme/chat-8b' : null,
      replicaId: index % 2 ? `rep_${index}` : null, endpoint: index % 2 ? 'chat.completions' : 'embeddings',
      status: index % 7 === 0 ? 'canceled' : 'succeeded', stream: index % 2 === 0,
      promptTokens: index, completionTokens: 2 * index, totalTokens: 3 * index, latencyMs: 1_000 + index,
      createdAt: new Date(Date.UTC(2026, 10, 27, 3, 4, 5, index % 1000)), batchId: index % 4 === 0 ? `batch_${index}` : null,
      adapterId: index % 3 === 0 ? `ad_${index}` : null,
    }) as UsageInput);
    const recorder = new UsageRecorder(database.dataSource, 60_000, logger);
    for (const input of inputs) recorder.record(input);
    await recorder.flush();
    // A failed write is kept for a retry timer: stop drops it, so a failure here cannot hang jest.
    await recorder.stop();

    const rows = await database.dataSource.getRepository(UsageRecord).find({ order: { apiKeyId: 'ASC' } });
    const byKey = new Map(rows.map((row) => [row.apiKeyId, row]));
    expect(rows).toHaveLength(500);
    for (const input of inputs) {
      const { id: _id, ...row } = byKey.get(input.apiKeyId)!;
      expect({ ...row, createdAt: row.createdAt.toISOString() }).toEqual({ ...input, createdAt: input.createdAt.toISOString() });
    }
  });

  it('puts a batch whose INSERT failed back before the records that came meanwhile, and writes them in order', async () => {
    const written: string[][] = [];
    let failures = 1;
    const fake = {
      getRepository: () => ({}),
      query: async (_sql: string, [json]: [string]) => {
        if (failures-- > 0) throw new Error('connection reset');
        written.push((JSON.parse(json) as UsageInput[]).map((record) => record.apiKeyId));
      },
    } as unknown as DataSource;
    const recorder = new UsageRecorder(fake, 60_000, logger);
    const input = (apiKeyId: string): UsageInput => ({
      workspaceId: 'ws', apiKeyId, deploymentId: 'dep', replicaId: null, endpoint: 'chat.completions', status: 'succeeded', stream: false,
      promptTokens: 1, completionTokens: 1, totalTokens: 2, latencyMs: 1, createdAt: new Date(),
    });
    recorder.record(input('a'));
    recorder.record(input('b'));
    await recorder.flush();
    recorder.record(input('c'));
    await recorder.flush();
    expect(written).toEqual([['a', 'b', 'c']]);
    await recorder.stop();
  });
});
