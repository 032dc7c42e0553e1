import OpenAI from 'openai';
import { verifyWebhookSignature } from '../../control-plane/webhooks/webhook-signature';
import { waitFor, deploymentForSuite } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';
import { chatLine, fileLines, jsonl, upload, waitForBatch } from './support/batch-helpers';
import { openForSuite } from '../support/suite';

/** CPU-engine lines that take about `seconds` (20 tokens at 20 tokens per second per second asked). */
const slow = (customId: string, seconds = 1) => chatLine(customId, `slow ${customId}`, { max_tokens: 20, cpu_engine: { tokens_per_second: 20 / seconds } });
const SLOTS = 4;

/**
 * How batches share a deployment with its live traffic: lines only in idle slots (a live
 * request takes a line's slot at once on the CPU engine, which sets the line aside), no autoscaling demand, cancel stops new lines at
 * once, a line lost with its agent runs again and is answered once, tokens per day are never
 * overrun, and the terminal webhook goes out through the outbox.
 */
describe('batches: scheduling', () => {
  const served = deploymentForSuite({
    controlPlane: {
      localMaxConcurrency: SLOTS,
      localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
      webhooks: { allowInsecureLoopback: true },
      batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50, lineLeaseMs: 3_000, tpdRetryMs: 200 },
    },
  });
  const receiver = openForSuite(() => startReceiver(), (opened) => opened.close());

  const lineStats = async (batchId: string) => (await served.test.server.controlPlane.dataSource.query(
    `SELECT count(*) FILTER (WHERE attempts > 0)::int AS started, count(*) FILTER (WHERE status = 'running')::int AS running,
            count(*) FILTER (WHERE status = 'pending')::int AS pending FROM batch_lines WHERE batch_id = $1`, [batchId]))[0] as { started: number; running: number; pending: number };

  beforeAll(async () => {
    await served.test.server.controlPlane.webhooks.service.endpoints.create(served.workspace.workspaceId, `${receiver.base}/ok/batches`);
  });

  it('serves a live request at once while the replica is full of batch lines (the CPU engine sets one aside), and batch lines are no autoscaling demand', async () => {
    const controlPlane = served.test.server.controlPlane;
    const connection = () => controlPlane.dispatcher.connections(served.deployment.id)[0];
    expect(connection().preemptsBatchLines).toBe(true);
    // Three short lines grow the window (one more per line finished with no live request
    // waiting) to the replica's slots; the long lines after them then hold every slot for ~3 s.
    const lines = [...Array.from({ length: 3 }, (_, index) => slow(`short-${index}`, 0.2)), ...Array.from({ length: SLOTS + 1 }, (_, index) => slow(`long-${index}`, 3))];
    const created = await served.client.batches.create({ input_file_id: await upload(served.client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    let peak = 0;
    await waitFor(() => {
      peak = Math.max(peak, connection().batchInFlight);
      return connection().batchInFlight === SLOTS;
    }, 15_000, 'every slot taken by batch lines');
    // The autoscaler's view of demand leaves batch lines out.
    expect(controlPlane.registry.loadSnapshot()[served.deployment.id]).toMatchObject({ inFlight: 0, queued: 0 });
    expect(connection().liveFreeSlots).toBe(SLOTS);
    const startedAt = Date.now();
    const live = await served.client.chat.completions.create({ messages: [{ role: 'user', content: 'a live question' }], max_tokens: 4 });
    const waitedMs = Date.now() - startedAt;
    expect(live.choices[0].message.content?.length).toBeGreaterThan(0);
    // Behind a line it would have waited for the first long line to end (~3 s after it started).
    expect(waitedMs).toBeLessThan(1_500);
    // The line set aside resumed: every line is answered, none twice.
    const batch = await waitForBatch(served.client, created.id, 30_000, (current) => current.status === 'completed' || current.status === 'failed');
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: lines.length, completed: lines.length, failed: 0 } });
    const output = await fileLines(served.client, batch.output_file_id);
    expect(output.map((line) => line.custom_id).sort()).toEqual(lines.map((line) => line.custom_id).sort());
    expect(Math.max(peak, SLOTS)).toBeLessThanOrEqual(SLOTS);
    expect(connection().batchInFlight).toBe(0);
  });

  it('cancels mid-way: no line starts after the cancel, running ones are stopped, every custom_id lands once, batch.cancelled is delivered', async () => {
    const lines = Array.from({ length: 20 }, (_, index) => slow(`c-${index}`, 2));
    const created = await served.client.batches.create({ input_file_id: await upload(served.client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    await waitFor(async () => (await lineStats(created.id)).running > 0, 10_000, 'a running line');
    const cancelling = await served.client.batches.cancel(created.id);
    expect(['cancelling', 'cancelled']).toContain(cancelling.status);
    expect(cancelling.cancelling_at).toEqual(expect.any(Number));
    const startedAtCancel = (await lineStats(created.id)).started;
    const requestedAt = Date.now();
    const batch = await waitForBatch(served.client, created.id);
    expect(Date.now() - requestedAt).toBeLessThan(5_000);
    expect(batch.status).toBe('cancelled');
    expect(batch.cancelled_at).toEqual(expect.any(Number));
    expect((await lineStats(created.id)).started).toBe(startedAtCancel);
    const output = await fileLines(served.client, batch.output_file_id);
    const errors = await fileLines(served.client, batch.error_file_id);
    expect([...output, ...errors].map((line) => line.custom_id).sort()).toEqual(lines.map((line) => line.custom_id).sort());
    expect(errors.length).toBeGreaterThan(0);
    for (const line of errors) expect(line).toMatchObject({ response: null, error: { code: 'batch_cancelled', message: expect.any(String) } });
    expect(batch.request_counts).toEqual({ total: 20, completed: output.length, failed: errors.length });
    // A second cancel changes nothing; the webhook says cancelled, signed, with the counts and files.
    expect((await served.client.batches.cancel(created.id)).status).toBe('cancelled');
    await waitFor(() => receiver.at('/ok/batches').some((delivery) => JSON.parse(delivery.rawBody.toString()).data.id === batch.id), 10_000, 'the batch.cancelled delivery');
    const delivery = receiver.at('/ok/batches').find((received) => JSON.parse(received.rawBody.toString()).data.id === batch.id)!;
    const secret = (await served.test.server.controlPlane.webhooks.service.revealSecret(served.workspace.workspaceId)).secret;
    expect(verifyWebhookSignature(secret, delivery.headers['x-service-signature'] as string, delivery.rawBody)).toBe(true);
    expect(JSON.parse(delivery.rawBody.toString())).toMatchObject({
      type: 'batch.cancelled',
      data: { id: batch.id, status: 'cancelled', request_counts: batch.request_counts, output_file_id: batch.output_file_id, error_file_id: batch.error_file_id },
    });
  });

  it('runs a line again after its agent crashed, at most twice: a line that crashes it every time is answered once, in the error file', async () => {
    const crashy = await served.test.createDeployment(served.workspace);
    await served.test.waitForReplicas(crashy.id, 1);
    const crashClient = new OpenAI({ baseURL: crashy.baseUrl, apiKey: served.workspace.apiKey, maxRetries: 0 });
    const lines = [chatLine('crash', 'crash the agent', { cpu_engine: { crash_after_tokens: 2 } }), ...Array.from({ length: 5 }, (_, index) => chatLine(`ok-${index}`, `fine ${index}`))];
    const created = await crashClient.batches.create({ input_file_id: await upload(crashClient, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await waitForBatch(crashClient, created.id, 40_000);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 6, completed: 5, failed: 1 } });
    const output = await fileLines(crashClient, batch.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(['ok-0', 'ok-1', 'ok-2', 'ok-3', 'ok-4']);
    const errors = await fileLines(crashClient, batch.error_file_id);
    expect(errors).toEqual([expect.objectContaining({ custom_id: 'crash', response: null, error: expect.objectContaining({ code: 'replica_lost' }) })]);
    const [{ attempts }] = await served.test.server.controlPlane.dataSource.query(`SELECT attempts FROM batch_lines WHERE batch_id = $1 AND custom_id = 'crash'`, [batch.id]);
    expect(attempts).toBe(2);
  }, 60_000);

  it('keeps a line pending while its key\'s tokens per day cannot hold it, never overrunning the day, and refuses one that could never fit', async () => {
    const limited = await served.test.createWorkspace({ tpdLimit: 200 });
    const deployment = await served.test.createDeployment(limited);
    await served.test.waitForReplicas(deployment.id, 1);
    const limitedClient = new OpenAI({ baseURL: deployment.baseUrl, apiKey: limited.apiKey, maxRetries: 0 });
    const lines = [chatLine('too-big', 'hi', { max_tokens: 5_000 }), ...Array.from({ length: 30 }, (_, index) => chatLine(`t-${index}`, `question ${index}`))];
    const created = await limitedClient.batches.create({ input_file_id: await upload(limitedClient, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    // Lines run until the day's budget cannot hold the next one's worst case, then wait.
    let last = -1;
    let steadySince = Date.now();
    await waitFor(async () => {
      const batch = await limitedClient.batches.retrieve(created.id);
      const done = batch.request_counts!.completed + batch.request_counts!.failed;
      if (done !== last) {
        last = done;
        steadySince = Date.now();
      }
      return done > 1 && Date.now() - steadySince > 1_500;
    }, 20_000, 'the batch to stop at the key\'s budget');
    const waiting = await limitedClient.batches.retrieve(created.id);
    expect(waiting.status).toBe('in_progress');
    expect(waiting.request_counts!.failed).toBe(1);
    expect(waiting.request_counts!.completed).toBeLessThan(30);
    expect((await lineStats(created.id)).pending).toBeGreaterThan(0);
    const [{ used }] = await served.test.server.controlPlane.dataSource.query(
      `SELECT COALESCE(SUM(total_tokens), 0)::int AS used FROM usage_records WHERE api_key_id = $1`, [limited.apiKeyId]);
    expect(used).toBeLessThanOrEqual(200);
    expect(used).toBe(waiting.usage!.total_tokens);
    // The budget left still admits a live request (the batch kept to what it could hold whole).
    await limitedClient.chat.completions.create({ messages: [{ role: 'user', content: 'live' }], max_tokens: 2 });
    const cancelled = await waitForBatch(limitedClient, (await limitedClient.batches.cancel(created.id)).id);
    const errors = await fileLines(limitedClient, cancelled.error_file_id);
    expect(errors[0]).toMatchObject({ custom_id: 'too-big', response: { status_code: 429, body: { error: { type: 'rate_limit_error' } } } });
    expect(errors.slice(1).every((line) => line.error?.code === 'batch_cancelled')).toBe(true);
  });
});
