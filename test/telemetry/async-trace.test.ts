import OpenAI from 'openai';
import { MediaClient } from '../media/support/media-client';
import { ServerProcess } from '../faults/support/server-process';
import { query } from '../faults/support/database';
import { OtlpReceiver, SPAN_KIND, type ReceivedSpan } from '../support/otlp-receiver';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';
import { waitFor } from '../support/test-server';
import { startReceiver } from '../webhooks/support/receiver';
import { chatLine, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

/**
 * Work that outlives its request stays in the submission's trace: an async image job (its wait
 * in the queue, its run on the agent) and its webhook delivery (each attempt a span, and the
 * receiver gets the attempt's `traceparent`); a background response's run and its webhook too.
 * A real server process (its exporter's HTTP transport loads node:http lazily, which jest's VM
 * cannot), tracing to a receiver here, as an operator would set it up with OTEL_*.
 */
describe('traces of async work, from submission to webhook', () => {
  let spans: OtlpReceiver;
  let hooks: Awaited<ReturnType<typeof startReceiver>>;
  let server: ServerProcess;
  let databaseUrl: string;
  let apiKey: string;
  let media: MediaClient;

  const graphql = async (text: string, variables: Record<string, unknown> = {}) => {
    const response = await fetch(`${server.url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ query: text, variables }),
    });
    const body = (await response.json()) as { data?: any; errors?: unknown };
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  };

  beforeAll(async () => {
    spans = await OtlpReceiver.start();
    hooks = await startReceiver();
    databaseUrl = await createTestDatabase();
    server = await ServerProcess.start({
      databaseUrl, env: {
        OTEL_EXPORTER_OTLP_ENDPOINT: spans.url, OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'platform',
        WEBHOOK_ALLOW_INSECURE_LOOPBACK: 'true', WEBHOOK_RETRY_SCHEDULE_MS: '100,200', RESPONSES_BACKGROUND_SWEEP_INTERVAL_MS: '100',
      },
    });
    apiKey = server.apiKey!;
    const created = await graphql(`mutation($model: String!) { createDeployment(input: {modelId: $model, priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1}) { deployment { id slug } } }`, { model: IMAGE_MODEL });
    const { id, slug } = created.createDeployment.deployment as { id: string; slug: string };
    await waitFor(async () => (await query(databaseUrl, `SELECT 1 FROM replicas WHERE deployment_id = $1 AND status = 'Running'`, [id])).length === 1, 60_000, 'the image replica');
    media = new MediaClient(`${server.url}/d/${slug}/v1`, apiKey);
    // Every event of the workspace (background responses' and batches' have no per-request URL).
    await graphql('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url: `${hooks.base}/ok/events` });
  }, 120_000);

  afterAll(async () => {
    await server?.dispose();
    await hooks?.close();
    await spans?.stop();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  const traceOf = (traceparent: string | null) => {
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    const [, traceId, spanId] = traceparent!.split('-');
    return { traceId, spanId };
  };
  const childrenOf = (all: ReceivedSpan[], parent: ReceivedSpan) => all.filter((span) => span.parentSpanId === parent.spanId);

  it('an async image job: queue wait, the job, the agent\'s spans and every webhook attempt are in its submission\'s trace', async () => {
    // The first attempt fails (503), the second succeeds: two attempt spans.
    const submitted = await media.post('/images/generations?async=true', {
      model: IMAGE_MODEL, prompt: 'a traced lighthouse', size: '512x512', webhook_url: `${hooks.base}/flaky/1/traced`,
    });
    expect(submitted.status).toBe(202);
    const { traceId, spanId: submissionSpanId } = traceOf(submitted.headers.get('traceparent'));
    const [record] = await query<{ id: string; traceparent: string }>(databaseUrl, 'SELECT id, traceparent FROM request_records WHERE id = $1', [submitted.body.id]);
    expect(record.traceparent).toBe(submitted.headers.get('traceparent'));

    await waitFor(() => hooks.at('/flaky/1/traced').length === 2, 15_000, 'the second delivery attempt');
    const attempts = hooks.at('/flaky/1/traced').map((delivery) => traceOf(String(delivery.headers.traceparent)));
    expect(attempts.map((attempt) => attempt.traceId)).toEqual([traceId, traceId]);

    const trace = await spans.waitFor((received) => attempts.every((attempt) => received.some((span) => span.spanId === attempt.spanId))
      && received.some((span) => span.traceId === traceId && span.service === 'inference-worker-agent' && span.name === 'agent job'), 15_000, 'the job\'s and the webhook\'s spans')
      .then(() => spans.trace(traceId));
    const submission = trace.find((span) => span.spanId === submissionSpanId)!;
    expect(submission).toMatchObject({ service: 'platform', kind: SPAN_KIND.server, name: 'POST images.generations' });
    expect(submission.attributes['http.response.status_code']).toBe(202);

    const queue = trace.find((span) => span.name === 'queue wait')!;
    expect(queue.parentSpanId).toBe(submissionSpanId);
    const job = trace.find((span) => span.name === `image_generation ${IMAGE_MODEL}`)!;
    expect(job.parentSpanId).toBe(submissionSpanId);
    expect(job.attributes).toMatchObject({ 'inference.record.id': record.id, 'inference.outcome': 'succeeded', 'inference.cost.basis': 'gpu_hours' });
    const agentJob = trace.find((span) => span.service === 'inference-worker-agent' && span.name === 'agent job')!;
    expect(agentJob.parentSpanId).toBe(job.spanId);
    expect(childrenOf(trace, agentJob).map((span) => span.name)).toEqual(['engine image_generation']);

    // The request's own webhook_url (the workspace's endpoint gets the event too: a delivery of its own).
    const webhookSpans = attempts.map((attempt) => trace.find((span) => span.spanId === attempt.spanId)!);
    expect(webhookSpans.map((span) => span?.name)).toEqual(['webhook request.completed', 'webhook request.completed']);
    expect(webhookSpans.map((span) => span.parentSpanId)).toEqual([submissionSpanId, submissionSpanId]);
    expect(webhookSpans[1].attributes['inference.webhook.delivery_id']).toBe(webhookSpans[0].attributes['inference.webhook.delivery_id']);
    expect(webhookSpans.map((span) => [span.attributes['inference.webhook.attempt'], span.attributes['http.response.status_code'], span.status.code]))
      .toEqual([[1, 503, 2], [2, 200, 0]]);
    expect(webhookSpans[0].attributes['inference.record.id']).toBe(record.id);
  }, 60_000);

  it('a background response: its run and its webhook are in its create request\'s trace', async () => {
    // The first run's chat deployment (the built-in CPU engine).
    const slug = /\/d\/([^/\s]+)\/v1/.exec(server.output())![1];
    const client = new OpenAI({ baseURL: `${server.url}/d/${slug}/v1`, apiKey, maxRetries: 0 });
    const { data: queued, response } = await client.responses.create({ input: 'in the background', max_output_tokens: 4, background: true }).withResponse();
    const { traceId, spanId } = traceOf(response.headers.get('traceparent'));
    // 4 tokens end it `incomplete` (max_output_tokens): its event is response.incomplete.
    await waitFor(() => hooks.at('/ok/events').some((delivery) => delivery.rawBody.toString().includes(queued.id)), 15_000, 'the response.incomplete delivery');
    const delivery = hooks.at('/ok/events').find((candidate) => candidate.rawBody.toString().includes(queued.id))!;
    expect(traceOf(String(delivery.headers.traceparent)).traceId).toBe(traceId);

    const trace = await spans.waitFor((received) => received.some((span) => span.traceId === traceId && span.name === 'webhook response.incomplete')
      && received.some((span) => span.traceId === traceId && span.name.startsWith('chat ')), 15_000, 'the turn\'s and the webhook\'s spans').then(() => spans.trace(traceId));
    const turn = trace.find((span) => span.name.startsWith('chat '))!;
    expect(turn.parentSpanId).toBe(spanId);
    expect(turn.attributes).toMatchObject({ 'gen_ai.operation.name': 'chat', 'inference.cost.basis': 'gpu_hours' });
    expect(turn.status.code).toBe(0);
    expect(trace.find((span) => span.name === 'webhook response.incomplete')!.parentSpanId).toBe(spanId);
  }, 60_000);

  it('a batch: each line a trace of its own linked to the create request, whose trace its webhook continues', async () => {
    const slug = /\/d\/([^/\s]+)\/v1/.exec(server.output())![1];
    const client = new OpenAI({ baseURL: `${server.url}/d/${slug}/v1`, apiKey, maxRetries: 0 });
    const { data: created, response } = await client.batches.create({
      input_file_id: await upload(client, jsonl([chatLine('a', 'one'), chatLine('b', 'two')])), endpoint: '/v1/chat/completions', completion_window: '24h',
    }).withResponse();
    const { traceId, spanId } = traceOf(response.headers.get('traceparent'));
    expect((await waitForBatch(client, created.id)).status).toBe('completed');

    const received = await spans.waitFor((all) => all.filter((span) => span.name === 'batch line' && span.links.some((link) => link.spanId === spanId)).length === 2
      && all.some((span) => span.traceId === traceId && span.name === 'webhook batch.completed'), 20_000, 'the lines\' spans and the batch webhook\'s');
    const lines = received.filter((span) => span.name === 'batch line' && span.links.some((link) => link.spanId === spanId));
    expect(lines.map((line) => line.links)).toEqual([[{ traceId, spanId }], [{ traceId, spanId }]]);
    expect(new Set(lines.map((line) => line.traceId)).size).toBe(2);
    for (const line of lines) {
      expect(line.traceId).not.toBe(traceId);
      expect(line.parentSpanId).toBe('');
      expect(line.attributes).toMatchObject({ 'inference.batch.id': created.id, 'inference.outcome': '200' });
      const inference = await spans.waitFor((all) => all.some((span) => span.traceId === line.traceId && span.name === 'agent job'), 10_000, 'the line\'s agent span')
        .then((all) => all.filter((span) => span.traceId === line.traceId));
      const chat = inference.find((span) => span.name.startsWith('chat '))!;
      expect(chat.parentSpanId).toBe(line.spanId);
      expect(chat.attributes).toMatchObject({ 'inference.batch.id': created.id, 'inference.cost.basis': 'gpu_hours' });
      expect(inference.find((span) => span.name === 'agent job')!.parentSpanId).toBe(chat.spanId);
    }
    expect(received.find((span) => span.traceId === traceId && span.name === 'webhook batch.completed')!.parentSpanId).toBe(spanId);
  }, 60_000);
});
