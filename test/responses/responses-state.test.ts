import fs from 'node:fs';
import OpenAI from 'openai';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, startWithDeployment, waitFor, type TestServer } from '../support/test-server';
import { ResponseRecord } from '../../control-plane/responses/response-record.entity';

/** A response's state is in PostgreSQL: a chain continues on a server started after the one that answered it, and retention deletes it. */
describe('stored responses across a restart', () => {
  let first: TestServer | null = null;
  let second: TestServer | null = null;
  let kept: { databaseUrl: string; dataDir: string } | null = null;

  afterAll(async () => {
    await first?.stop({ keepDatabase: true, keepData: true });
    await second?.stop();
    if (kept) {
      await dropTestDatabase(kept.databaseUrl);
      fs.rmSync(kept.dataDir, { recursive: true, force: true });
    }
  });

  it('continues a chain after the server restarts, and sweeps responses past their retention', async () => {
    const { test: started, workspace, deployment, client: before } = await startWithDeployment();
    first = started;
    const { databaseUrl, dataDir } = first;
    kept = { databaseUrl, dataDir };
    const turn1 = await before.responses.create({ input: 'Remember the number 7', max_output_tokens: 5 });
    await first.stop({ keepDatabase: true, keepData: true });
    first = null;

    // One second of retention on the new server: what it stores is swept at once; turn 1 keeps its 30 days.
    second = await startTestServer({ databaseUrl, dataDir, controlPlane: { responses: { retentionDays: 1 / 86_400, sweepIntervalMs: 50 } } });
    await second.waitForReplicas(deployment.id, 1);
    const after = new OpenAI({ baseURL: `${second.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
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
