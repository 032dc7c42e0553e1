import OpenAI, { APIError } from 'openai';
import { COLD_START_REASON, SCALED_TO_ZERO_REASON } from '../../control-plane/deployments/scaled-to-zero';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { chatLine, fileLines, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';
import { MediaClient } from '../media/support/media-client';
import { graphqlClient } from './support/graphql-client';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

/**
 * Scale to zero with real agents (CPU engine, local provider) and the real capacity loop, its
 * times shortened: a deployment idle for scaleToZeroAfterSeconds gives its replicas back, the
 * next requests wait at the gateway while one starts (the cold start), and nothing is lost: a
 * request either gets its answer or a 503 with Retry-After, and only answers are billed.
 */
describe('scale to zero', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;
  let zero: TestDeployment;
  let alwaysOn: TestDeployment;
  let images: TestDeployment;
  let client: OpenAI;

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: {
        capacityIntervalMs: 100, autoscaleWindowMs: 300, autoscaleScaleDownStabilizationMs: 1_500,
        coldStartMaxWaitMs: 30_000, coldStartEstimateMs: 3_000,
        batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50, lineLeaseMs: 1_500 },
        // Every engine takes 1.5 s to load, so a cold start is long enough to be seen waiting.
        localAgentEnv: { WORKER_CPU_LOAD_MS: '1500' },
      },
    });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    zero = await test.createDeployment(workspace, { minReplicas: 1, maxReplicas: 2, autoscale: true });
    alwaysOn = await test.createDeployment(workspace, { minReplicas: 1, maxReplicas: 2, autoscale: true });
    images = await test.createDeployment(workspace, { modelId: IMAGE_MODEL, minReplicas: 1, maxReplicas: 1, autoscale: true });
    await test.waitForReplicas(zero.id, 1);
    await test.waitForReplicas(alwaysOn.id, 1);
    await test.waitForReplicas(images.id, 1);
    // The settings' GraphQL inputs and their validation come with the deployment settings of
    // issue 39; the row is what the capacity loop and the gateway read.
    await settings(zero.id, { scaleToZeroAfterSeconds: 1, coldStartQueueLimit: 100 });
    client = new OpenAI({ baseURL: zero.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
  }, 120_000);

  afterAll(async () => {
    await test?.stop();
  });

  const settings = async (id: string, changes: { scaleToZeroAfterSeconds?: number | null; coldStartQueueLimit?: number }) => {
    await test.server.controlPlane.deploymentStore.update(id, changes, ['Creating', 'Running']);
  };

  const state = async (id: string) => (await graphql(`query($id: ID!) { deployment(id: $id) {
    status statusReason desiredReplicas waitingForReplica replicas { status statusReason }
    scalingDecisions(limit: 200) { action reason explanation currentReplicas desiredReplicas inputs policy movedBy } } }`, { id })).data.deployment;

  const activeReplicas = async (id: string) => (await test.server.controlPlane.replicas.listActive(id)).length;

  /** Idle past the setting: every replica given back, the deployment still Running and saying so. */
  const scaledToZero = async (id = zero.id) => {
    await waitFor(async () => (await activeReplicas(id)) === 0 && test.server.controlPlane.dispatcher.readyReplicas(id) === 0, 20_000, 'a scale to zero');
    await waitFor(async () => (await state(id)).statusReason === SCALED_TO_ZERO_REASON, 5_000, 'the scaled-to-zero reason');
  };

  /** The deployment's usage records, every one settled so far written first (a request's is settled before its answer ends). */
  const usage = async () => {
    await test.server.controlPlane.usage.flush();
    return await test.server.controlPlane.dataSource.query(
      'SELECT status, stream FROM usage_records WHERE deployment_id = $1 ORDER BY id', [zero.id]) as Array<{ status: string; stream: boolean }>;
  };

  const metrics = async () => await (await fetch(`${test.url}/metrics`)).text();

  it('scales to zero after idling, and a chat request then waits for a cold start and is answered', async () => {
    await scaledToZero();
    const idle = await state(zero.id);
    expect(idle).toMatchObject({ status: 'Running', statusReason: SCALED_TO_ZERO_REASON, desiredReplicas: 0, waitingForReplica: 0 });
    // Billing stops: no replica is left running, each ended for the stated reason.
    expect(idle.replicas.every((replica: any) => replica.status === 'Terminated')).toBe(true);
    expect(idle.replicas.some((replica: any) => replica.statusReason === 'scaled to zero after 1 s without requests')).toBe(true);
    const down = idle.scalingDecisions.find((decision: any) => decision.reason === 'scale_to_zero' && decision.action === 'scale_down');
    expect(down).toMatchObject({ desiredReplicas: 0, currentReplicas: 1 });
    expect(down.explanation).toMatch(/^Scaling down from 1 to 0 replicas: no request for [\d.]+ s \(scale to zero after 1 s\)/);
    expect(down).toMatchObject({ policy: 'concurrency', movedBy: 'idle' });
    expect(JSON.parse(down.inputs)).toMatchObject({ scaleToZeroAfterMs: 1_000, waitingForReplica: 0 });
    expect(JSON.parse(down.inputs).idleMs).toBeGreaterThanOrEqual(1_000);

    const answer = client.chat.completions.create({ messages: [{ role: 'user', content: 'hello after a nap' }], max_tokens: 8 });
    // The console's "starting: 1 request waiting" while the replica loads, and the gauge with it.
    await waitFor(async () => (await state(zero.id)).waitingForReplica === 1, 10_000, 'the request waiting for a replica');
    expect(await metrics()).toMatch(new RegExp(`inference_cold_start_waiting\\{deployment="${zero.id}"\\} 1`));
    const completion = await answer;
    expect(completion.choices[0].message.content?.length).toBeGreaterThan(0);
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);

    const after = await state(zero.id);
    expect(after.waitingForReplica).toBe(0);
    const cold = after.scalingDecisions.find((decision: any) => decision.reason === 'cold_start');
    expect(cold).toMatchObject({ action: 'scale_up', currentReplicas: 0, desiredReplicas: 1 });
    expect(cold.explanation).toBe('Scaling up from 0 to 1 replica at once (cold start): 1 request waiting at the gateways for a replica.');
    expect(cold.movedBy).toBe('waiting');
    expect(JSON.parse(cold.inputs)).toMatchObject({ waitingForReplica: 1 });
    // Once the replica serves, the cold start's reason is gone.
    await waitFor(async () => ![COLD_START_REASON, SCALED_TO_ZERO_REASON].includes((await state(zero.id)).statusReason), 5_000, 'the cold start reason cleared');
    expect(await usage()).toEqual([{ status: 'succeeded', stream: false }]);
  });

  it('a streamed request at zero waits the same way and streams its answer', async () => {
    await scaledToZero();
    const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: 'stream after a nap' }], max_tokens: 8, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    expect(text.length).toBeGreaterThan(0);
    expect((await usage())[1]).toEqual({ status: 'succeeded', stream: true });
    const reasons = (await state(zero.id)).scalingDecisions.map((decision: any) => decision.reason);
    expect(reasons.filter((reason: string) => reason === 'cold_start').length).toBeGreaterThanOrEqual(2);
  });

  it('with coldStartQueueLimit 1, of two concurrent requests one is answered and one refused 503 no_pod_available with Retry-After; only the answer is billed', async () => {
    await settings(zero.id, { coldStartQueueLimit: 1 });
    await scaledToZero();
    const before = (await usage()).length;
    const ask = () => client.chat.completions.create({ messages: [{ role: 'user', content: 'who goes first?' }], max_tokens: 4 });
    const results = await Promise.allSettled([ask(), ask()]);
    const answered = results.filter((result) => result.status === 'fulfilled');
    const refused = results.filter((result): result is PromiseRejectedResult => result.status === 'rejected');
    expect(answered).toHaveLength(1);
    expect(refused).toHaveLength(1);
    const error = refused[0].reason as APIError;
    expect(error).toBeInstanceOf(APIError);
    expect(error.status).toBe(503);
    expect(error.code).toBe('no_pod_available');
    expect(Number(error.headers?.get('retry-after'))).toBeGreaterThanOrEqual(2);
    // The refused request never ran: it has no record.
    expect((await usage()).slice(before)).toEqual([{ status: 'succeeded', stream: false }]);
    expect(await metrics()).toMatch(new RegExp(`inference_cold_start_refusals_total\\{deployment="${zero.id}",reason="queue_full"\\} 1`));
  });

  it('a waiting request whose client leaves frees its place at once', async () => {
    await settings(zero.id, { coldStartQueueLimit: 1 });
    await scaledToZero();
    const before = (await usage()).length;
    const abort = new AbortController();
    const leaving = client.chat.completions.create({ messages: [{ role: 'user', content: 'never mind' }], max_tokens: 4 }, { signal: abort.signal });
    await waitFor(() => test.server.controlPlane.coldStarts.waiting(zero.id) === 1, 10_000, 'the request waiting');
    abort.abort();
    await expect(leaving).rejects.toThrow();
    await waitFor(() => test.server.controlPlane.coldStarts.waiting(zero.id) === 0, 5_000, 'its place freed');
    // The one place is free again: the next request waits (it is not refused) and is answered.
    const completion = await client.chat.completions.create({ messages: [{ role: 'user', content: 'me then' }], max_tokens: 4 });
    expect(completion.choices[0].message.content?.length).toBeGreaterThan(0);
    // The request that left never ran: only the answer has a record.
    expect((await usage()).slice(before)).toEqual([{ status: 'succeeded', stream: false }]);
  });

  it('a batch at zero starts a replica, which stays until every line is answered', async () => {
    await scaledToZero();
    const lines = Array.from({ length: 4 }, (_, index) => chatLine(`z-${index}`, `line ${index}`));
    const created = await client.batches.create({ input_file_id: await upload(client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await waitForBatch(client, created.id, 30_000);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 4, failed: 0 } });
    expect((await fileLines(client, batch.output_file_id!)).map((line) => line.custom_id)).toEqual(lines.map((line) => line.custom_id));
    const cold = (await state(zero.id)).scalingDecisions.find((decision: any) => decision.reason === 'cold_start');
    expect(cold.movedBy).toBe('queue');
  });

  it('media at zero: an async job queued is demand that starts a replica, and a sync image call waits within its budget', async () => {
    await settings(images.id, { scaleToZeroAfterSeconds: 1 });
    await scaledToZero(images.id);
    const media = new MediaClient(images.baseUrl, workspace.apiKey);
    const submitted = await media.post('/images/generations?async=true', { model: IMAGE_MODEL, prompt: 'a lighthouse at dawn', size: '512x512' });
    expect(submitted.status).toBe(202);
    expect(await media.waitForRecord(submitted.body.id)).toMatchObject({ status: 'succeeded' });
    const queued = (await state(images.id)).scalingDecisions.find((decision: any) => decision.reason === 'cold_start');
    expect(queued).toMatchObject({ currentReplicas: 0, desiredReplicas: 1 });
    expect(queued.movedBy).toBe('queue');

    await scaledToZero(images.id);
    const sync = await new OpenAI({ baseURL: images.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 })
      .images.generate({ model: IMAGE_MODEL, prompt: 'the same lighthouse at dusk', size: '512x512', response_format: 'b64_json' });
    expect(sync.data?.[0].b64_json?.length).toBeGreaterThan(0);
    const decisions = (await state(images.id)).scalingDecisions.filter((decision: any) => decision.reason === 'cold_start');
    expect(decisions.length).toBeGreaterThanOrEqual(2);
    expect(decisions[0].movedBy).toBe('waiting');
    expect(JSON.parse(decisions[0].inputs)).toMatchObject({ waitingForReplica: 1 });
  });

  it('a deployment without scale to zero never goes below one replica, however long it idles', async () => {
    // It has idled through every test above, each many times the other deployment's 1 s.
    const idle = await state(alwaysOn.id);
    expect(idle.desiredReplicas).toBe(1);
    expect(await activeReplicas(alwaysOn.id)).toBe(1);
    expect(test.server.controlPlane.dispatcher.readyReplicas(alwaysOn.id)).toBe(1);
    expect(idle.scalingDecisions.some((decision: any) => decision.reason === 'scale_to_zero' || decision.desiredReplicas === 0)).toBe(false);
    expect(idle.statusReason).toBeNull();
  });
});
