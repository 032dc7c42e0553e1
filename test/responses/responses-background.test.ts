import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { verifyWebhookSignature } from '../../control-plane/webhooks/webhook-signature';
import { deploymentForSuite, restartForSuite, startTestServer, waitFor, type TestServer } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';
import { openForSuite } from '../support/suite';

type Response = OpenAI.Responses.Response;

/** The built-in CPU engine at 25 tokens/s: a 400-token turn runs 16 s, long enough to cancel; a 6-token one is quick. */
const SLOW_AGENT_ENV = { WORKER_CPU_TOKENS_PER_SECOND: '25' };
/** …and a replica takes a second to load its model: a turn on a new deployment waits in the queue meanwhile. */
const LOADING_AGENT_ENV = { ...SLOW_AGENT_ENV, WORKER_CPU_LOAD_MS: '1000' };
const BACKGROUND = { backgroundSweepIntervalMs: 100, backgroundLeaseMs: 1_000, backgroundRetryDelayMs: 100 };
const ENDED = new Set(['completed', 'incomplete', 'failed', 'cancelled']);

async function settled(client: OpenAI, id: string, timeoutMs = 20_000): Promise<Response> {
  let response: Response | null = null;
  await waitFor(async () => ENDED.has((response = await client.responses.retrieve(id)).status!), timeoutMs, `response ${id} to end`);
  return response!;
}

/** `background: true` on `/d/<slug>/v1/responses`: queued at once, run by the background runner, polled, cancelled, signed webhooks. */
describe('background responses', () => {
  const served = deploymentForSuite({
    controlPlane: {
      localAgentEnv: LOADING_AGENT_ENV, responses: BACKGROUND,
      webhooks: { allowInsecureLoopback: true, retryScheduleMs: [150, 300], attemptTimeoutMs: 1_000 },
    },
  });
  const receiver = openForSuite(() => startReceiver(), (opened) => opened.close());

  const usageRecords = async () => served.test.server.controlPlane.dataSource.getRepository(UsageRecord)
    .find({ where: { workspaceId: served.workspace.workspaceId, endpoint: 'responses' }, order: { id: 'ASC' } });

  it('answers queued at once, runs to the same end as the foreground turn, and is metered as one turn', async () => {
    const request = { input: 'Describe the background queue', max_output_tokens: 6 };
    const before = (await usageRecords()).length;
    const queued = await served.client.responses.create({ ...request, background: true });
    expect(queued).toMatchObject({ object: 'response', status: 'queued', background: true, output: [], usage: null, error: null });
    expect(queued.id).toMatch(/^resp_/);

    const ended = await settled(served.client, queued.id);
    const foreground = await served.client.responses.create(request);
    expect(ended.status).toBe(foreground.status);
    expect(ended.background).toBe(true);
    expect(ended.output_text).toBe(foreground.output_text);
    expect(ended.output_text.length).toBeGreaterThan(0);
    expect(ended.usage).toEqual(foreground.usage);
    expect(ended.incomplete_details).toEqual(foreground.incomplete_details);

    await waitFor(async () => (await usageRecords()).length === before + 2, 5_000, 'one usage record per turn');
    const [backgroundRecord, foregroundRecord] = (await usageRecords()).slice(-2);
    expect(backgroundRecord).toMatchObject({ status: 'succeeded', deploymentId: served.deployment.id, apiKeyId: served.workspace.apiKeyId });
    // The same tokens and outcome (the background turn streams from the engine, so its record says stream).
    const metered = (record: UsageRecord) => ({ ...record, id: 0, latencyMs: 0, createdAt: null, stream: null });
    expect(metered(backgroundRecord)).toEqual(metered(foregroundRecord));
    // It continues a chain like any stored response.
    const next = await served.client.responses.create({ input: 'and then?', previous_response_id: queued.id, max_output_tokens: 3 });
    expect(next.usage!.input_tokens).toBeGreaterThan(ended.usage!.input_tokens + ended.usage!.output_tokens);
  });

  it('cancels an in-progress response on the engine: cancelled, billed for the tokens it generated, and cancelling again answers it unchanged', async () => {
    const created = await served.client.responses.create({ input: 'A long essay about queues', max_output_tokens: 400, background: true });
    await waitFor(async () => (await served.client.responses.retrieve(created.id)).status === 'in_progress', 10_000, 'the turn to start');
    await new Promise((resolve) => setTimeout(resolve, 400));
    const cancelled = await served.client.responses.cancel(created.id);
    expect(cancelled).toMatchObject({ id: created.id, status: 'cancelled', background: true });

    // The engine's count of what it generated comes with the cancelled job's end.
    let stored: Response | null = null;
    await waitFor(async () => (stored = await served.client.responses.retrieve(created.id)).usage !== null, 10_000, 'the cancelled turn\'s usage');
    expect(stored!.status).toBe('cancelled');
    expect(stored!.usage!.output_tokens).toBeGreaterThan(0);
    expect(stored!.usage!.output_tokens).toBeLessThan(400);
    // What it generated before the cancel is kept, cut.
    expect(stored!.output).toHaveLength(1);
    expect(stored!.output[0]).toMatchObject({ type: 'message', status: 'incomplete' });
    expect(stored!.output_text.length).toBeGreaterThan(0);
    await waitFor(async () => (await usageRecords()).some((record) => record.status === 'canceled'), 5_000, 'the cancelled turn\'s usage record');
    const record = (await usageRecords()).find((candidate) => candidate.status === 'canceled')!;
    expect(record.completionTokens).toBe(stored!.usage!.output_tokens);
    expect(record.promptTokens).toBe(stored!.usage!.input_tokens);

    expect(await served.client.responses.cancel(created.id)).toMatchObject({ id: created.id, status: 'cancelled', usage: stored!.usage });
  });

  it('stops at the engine a running response that is deleted', async () => {
    const created = await served.client.responses.create({ input: 'An essay nobody will read', max_output_tokens: 400, background: true });
    await waitFor(async () => (await served.client.responses.retrieve(created.id)).status === 'in_progress', 10_000, 'the turn to start');
    const before = (await usageRecords()).length;
    expect(await served.client.responses.delete(created.id)).toEqual({ id: created.id, object: 'response', deleted: true });
    await expect(served.client.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await waitFor(async () => (await usageRecords()).length > before, 10_000, 'the stopped turn\'s usage record');
    const [record] = (await usageRecords()).slice(before);
    expect(record.status).toBe('canceled');
    expect(record.completionTokens).toBeLessThan(400);
  });

  it('cancels a queued response before it runs: it never runs and is never billed', async () => {
    // A new deployment has no ready replica yet: its background turn waits in the queue.
    const waiting = await served.test.createDeployment(served.workspace);
    const waitingClient = new OpenAI({ baseURL: waiting.baseUrl, apiKey: served.workspace.apiKey, maxRetries: 0 });
    const created = await waitingClient.responses.create({ input: 'never run', max_output_tokens: 5, background: true });
    expect(created.status).toBe('queued');
    const cancelled = await waitingClient.responses.cancel(created.id);
    expect(cancelled).toMatchObject({ status: 'cancelled', usage: null, output: [] });
    await served.test.waitForReplicas(waiting.id, 1);
    // A few sweeps later it is still cancelled, and nothing ran on the new deployment.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await waitingClient.responses.retrieve(created.id)).toMatchObject({ status: 'cancelled', usage: null, output: [] });
    expect((await usageRecords()).filter((record) => record.deploymentId === waiting.id)).toEqual([]);
  });

  it('signs response.completed to the workspace\'s webhook endpoint', async () => {
    await served.test.server.controlPlane.webhooks.service.endpoints.create(served.workspace.workspaceId, `${receiver.base}/ok/responses`);
    const secret = (await served.test.server.controlPlane.webhooks.service.revealSecret(served.workspace.workspaceId)).secret;
    const created = await served.client.responses.create({
      input: 'a city', max_output_tokens: 100, background: true,
      text: { format: { type: 'json_schema', name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }, strict: true } },
    });
    const ended = await settled(served.client, created.id);
    expect(ended.status).toBe('completed');
    await waitFor(() => receiver.at('/ok/responses').length === 1, 10_000, 'the delivery');
    const [delivery] = receiver.at('/ok/responses');
    expect(delivery.headers['x-service-event']).toBe('response.completed');
    expect(verifyWebhookSignature(secret, delivery.headers['x-service-signature'] as string, delivery.rawBody)).toBe(true);
    expect(verifyWebhookSignature('whsec_wrong', delivery.headers['x-service-signature'] as string, delivery.rawBody)).toBe(false);
    expect(JSON.parse(delivery.rawBody.toString('utf8'))).toEqual({
      id: expect.stringMatching(/^evt_/), type: 'response.completed',
      data: { id: created.id, object: 'response', status: 'completed', model: ended.model, error: null, incomplete_details: null, usage: ended.usage },
    });

    const cancelled = await served.client.responses.create({ input: 'to be cancelled', max_output_tokens: 400, background: true });
    await served.client.responses.cancel(cancelled.id);
    await waitFor(() => receiver.at('/ok/responses').length === 2, 10_000, 'the second delivery');
    expect(JSON.parse(receiver.at('/ok/responses')[1].rawBody.toString('utf8'))).toMatchObject({ type: 'response.cancelled', data: { id: cancelled.id, status: 'cancelled' } });
  });

  it('runs again a response whose server died mid-turn, and fails one that already took its last run', async () => {
    const rows = served.test.server.controlPlane.dataSource;
    // As a server that died leaves them: in progress, leased to it, the lease run out.
    const orphan = async (id: string, attempts: number) => rows.query(`UPDATE responses SET status = 'in_progress', output = '[]', usage = NULL,
      incomplete_details = NULL, completed_at = NULL, lease_owner = 'a-dead-server', lease_expires_at = clock_timestamp() - interval '1 second', attempts = $2
      WHERE id = $1`, [id, attempts]);
    const rerun = await settled(served.client, (await served.client.responses.create({ input: 'run me twice', max_output_tokens: 4, background: true })).id);
    const doomed = await settled(served.client, (await served.client.responses.create({ input: 'run me once', max_output_tokens: 4, background: true })).id);
    await orphan(rerun.id, 1);
    await orphan(doomed.id, 2);

    const again = await settled(served.client, rerun.id);
    expect(again).toMatchObject({ status: rerun.status, output_text: rerun.output_text, usage: rerun.usage });
    const failed = await settled(served.client, doomed.id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ code: 'server_error', message: expect.stringContaining('stopped before it finished') });
    // One left in the queue past its time (every server down for an hour) is not started, and fails saying why.
    const late = await settled(served.client, (await served.client.responses.create({ input: 'too late', max_output_tokens: 4, background: true })).id);
    await rows.query(`UPDATE responses SET created_at = clock_timestamp() - interval '1 hour' WHERE id = $1`, [late.id]);
    await orphan(late.id, 0);
    const expired = await settled(served.client, late.id);
    expect(expired).toMatchObject({ status: 'failed', output: [], usage: null, error: { code: 'server_error', message: expect.stringContaining('did not finish within 600 s') } });

    // Each end is an event: its first run's, then the failure.
    const events = () => receiver.at('/ok/responses').map((delivery) => JSON.parse(delivery.rawBody.toString('utf8'))).filter((body) => body.data.id === doomed.id);
    await waitFor(() => events().length === 2, 10_000, 'response.failed');
    expect(events().map((event) => event.type)).toEqual([`response.${doomed.status}`, 'response.failed']);
    expect(events()[1]).toMatchObject({ data: { status: 'failed', error: failed.error, usage: null } });
  });

  it('hides a background response from another workspace: retrieve and cancel answer 404', async () => {
    const created = await served.client.responses.create({ input: 'mine', max_output_tokens: 3, background: true });
    const other = await served.test.createWorkspace();
    const otherDeployment = await served.test.createDeployment(other);
    const stranger = new OpenAI({ baseURL: otherDeployment.baseUrl, apiKey: other.apiKey, maxRetries: 0 });
    await expect(stranger.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    // Nor through the owner's deployment URL with the stranger's key.
    const sneaky = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: other.apiKey, maxRetries: 0 });
    await expect(sneaky.responses.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    expect((await settled(served.client, created.id)).status).not.toBe('cancelled');
  });

  it('refuses what it cannot do with a 400 naming the field', async () => {
    await expect(served.client.responses.create({ input: 'x', background: true, store: false })).rejects.toMatchObject({ status: 400, param: 'background' });
    await expect(served.client.responses.create({ input: 'x', background: true, stream: true })).rejects.toMatchObject({ status: 400, param: 'stream' });
    const foreground = await served.client.responses.create({ input: 'x', max_output_tokens: 2 });
    await expect(served.client.responses.cancel(foreground.id)).rejects.toMatchObject({ status: 400, param: 'response_id' });
    const finished = await settled(served.client, (await served.client.responses.create({ input: 'x', max_output_tokens: 2, background: true })).id);
    const refusal = await served.client.responses.cancel(finished.id).catch((error: OpenAI.APIError) => error);
    expect(refusal).toMatchObject({ status: 400, param: 'response_id' });
    expect((refusal as OpenAI.APIError).message).toContain(`already ${finished.status}`);
    await expect(served.client.responses.cancel('resp_0123')).rejects.toMatchObject({ status: 404 });
  });
});

/** A background response survives its server: stopped mid-turn, it is run again by the server started on the same database. */
describe('background responses across a restart', () => {
  const restart = restartForSuite();

  it('completes on the next server a response that was in progress when its server stopped', async () => {
    const { workspace, deployment, client: before } = await restart.start({ controlPlane: { localAgentEnv: SLOW_AGENT_ENV, responses: BACKGROUND } });
    const created = await before.responses.create({ input: 'Outlive the server', max_output_tokens: 50, background: true });
    await waitFor(async () => (await before.responses.retrieve(created.id)).status === 'in_progress', 10_000, 'the turn to start');
    await restart.stopFirst();

    const { test: second, baseUrl } = await restart.startSecond({ controlPlane: { localAgentEnv: SLOW_AGENT_ENV, responses: BACKGROUND } });
    await second.waitForReplicas(deployment.id, 1);
    const after = new OpenAI({ baseURL: baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const ended = await settled(after, created.id, 30_000);
    // Run again from the start: the whole answer, as a turn that never stopped gives it.
    expect(ended.status).toBe('incomplete');
    expect(ended.usage!.output_tokens).toBe(50);
    const foreground = await after.responses.create({ input: 'Outlive the server', max_output_tokens: 50 });
    expect(ended.output_text).toBe(foreground.output_text);
  });
});

/** Two servers on one database: a cancel sent to the server that does not run the turn reaches the one that does. */
describe('background responses on several servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  it('cancels at the engine a turn running on the other server', async () => {
    serverA = await startTestServer({ controlPlane: { localAgentEnv: SLOW_AGENT_ENV, responses: BACKGROUND } });
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { localAgents: false, responses: BACKGROUND } });
    const workspace = await serverA.createWorkspace();
    const deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
    const onA = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const onB = new OpenAI({ baseURL: `${serverB.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
    const created = await onA.responses.create({ input: 'A long essay on two servers', max_output_tokens: 400, background: true });
    await waitFor(async () => (await onB.responses.retrieve(created.id)).status === 'in_progress', 10_000, 'the turn to start on A');
    await new Promise((resolve) => setTimeout(resolve, 300));

    expect(await onB.responses.cancel(created.id)).toMatchObject({ status: 'cancelled' });
    let stored: Response | null = null;
    await waitFor(async () => (stored = await onB.responses.retrieve(created.id)).usage !== null, 10_000, 'server A to cancel the engine job');
    expect(stored!.usage!.output_tokens).toBeGreaterThan(0);
    expect(stored!.usage!.output_tokens).toBeLessThan(400);
    const records = () => serverA.server.controlPlane.dataSource.query(
      `SELECT status, completion_tokens FROM usage_records WHERE workspace_id = $1 AND endpoint = 'responses'`, [workspace.workspaceId]);
    await waitFor(async () => (await records()).length > 0, 5_000, 'the usage record');
    expect(await records()).toEqual([{ status: 'canceled', completion_tokens: stored!.usage!.output_tokens }]);
  });
});
