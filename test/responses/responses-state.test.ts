import OpenAI from 'openai';
import { restartForSuite, waitFor } from '../support/test-server';
import { ResponseRecord } from '../../control-plane/responses/response-record.entity';

/** A response's state is in PostgreSQL: a chain continues on a server started after the one that answered it, and retention deletes it. */
describe('stored responses across a restart', () => {
  const restart = restartForSuite();

  it('continues a chain after the server restarts, and sweeps responses past their retention', async () => {
    const { workspace, deployment, client: before } = await restart.start();
    const turn1 = await before.responses.create({ input: 'Remember the number 7', max_output_tokens: 5 });
    await restart.stopFirst();

    // One second of retention on the new server: what it stores is swept at once; turn 1 keeps its 30 days.
    const { test: second, baseUrl } = await restart.startSecond({ controlPlane: { responses: { retentionDays: 1 / 86_400, sweepIntervalMs: 50 } } });
    await second.waitForReplicas(deployment.id, 1);
    const after = new OpenAI({ baseURL: baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    expect((await after.responses.retrieve(turn1.id)).output_text).toBe(turn1.output_text);
    const turn2 = await after.responses.create({ input: 'Which number?', previous_response_id: turn1.id, max_output_tokens: 5 });
    expect(turn2.previous_response_id).toBe(turn1.id);
    expect(turn2.usage!.input_tokens).toBeGreaterThan(turn1.usage!.input_tokens + turn1.usage!.output_tokens);

    const rows = second.server.controlPlane.dataSource.getRepository(ResponseRecord);
    await waitFor(async () => !(await rows.existsBy({ id: turn2.id })), 10_000, 'the expired response swept');
    await expect(after.responses.retrieve(turn2.id)).rejects.toMatchObject({ status: 404 });
    await expect(after.responses.create({ input: 'more', previous_response_id: turn2.id })).rejects.toMatchObject({ status: 400, param: 'previous_response_id' });
    expect(await rows.existsBy({ id: turn1.id })).toBe(true);
  });
});
