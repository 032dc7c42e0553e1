import { waitFor, deploymentForSuite } from '../support/test-server';
import { fileLines, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';

/** `/v1/responses` as a batch endpoint: each line checked by the live parser, run as its chat, answered with a Response object. */
describe('Responses in batches', () => {
  const served = deploymentForSuite();

  it('answers each line as POST /v1/responses would, refusing what a batch cannot do', async () => {
    const line = (customId: string, body: Record<string, unknown>) => ({ custom_id: customId, method: 'POST', url: '/v1/responses', body });
    const good = ['one', 'two', 'three'].map((word) => line(word, { input: `Say ${word}`, max_output_tokens: 6, metadata: { word } }));
    const refused = [
      line('hot', { input: 'x', temperature: 9 }),
      line('stored', { input: 'x', store: true }),
      line('chained', { input: 'x', previous_response_id: 'resp_1' }),
    ];
    const created = await served.client.batches.create({ input_file_id: await upload(served.client, jsonl([...good, ...refused])), endpoint: '/v1/responses', completion_window: '24h' });
    const batch = await waitForBatch(served.client, created.id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 6, completed: 3, failed: 3 });
    const output = await fileLines(served.client, batch.output_file_id);
    expect(output.map((entry) => entry.custom_id)).toEqual(['one', 'two', 'three']);
    for (const entry of output) {
      expect(entry.response.status_code).toBe(200);
      expect(entry.response.body).toMatchObject({ object: 'response', store: false, metadata: { word: entry.custom_id }, output: [{ type: 'message', role: 'assistant' }] });
      expect(entry.response.body.id).toMatch(/^resp_/);
      expect(entry.response.body.usage.output_tokens).toBeGreaterThan(0);
    }
    const errors = await fileLines(served.client, batch.error_file_id);
    expect(errors.map((entry) => [entry.custom_id, entry.response.status_code, entry.response.body.error.param]))
      .toEqual([['hot', 400, 'temperature'], ['stored', 400, 'store'], ['chained', 400, 'previous_response_id']]);
    const recorded = async () => (await served.test.server.controlPlane.dataSource.query(
      `SELECT count(*)::int AS n FROM usage_records WHERE endpoint = 'responses' AND batch_id IS NOT NULL`))[0].n;
    await waitFor(async () => (await recorded()) === 3, 5_000, 'three batch usage records of endpoint responses');
  });
});
