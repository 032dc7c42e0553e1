import { randomBytes } from 'node:crypto';
import OpenAI from 'openai';
import { ServerProcess } from '../faults/support/server-process';
import { within } from '../faults/support/processes';
import { startMockEngine } from '../support/mock-engine';
import { OtlpReceiver, SPAN_KIND, type ReceivedSpan } from '../support/otlp-receiver';
import { createTestDatabase, dropTestDatabase } from '../support/test-database';

/**
 * One request, one trace, across three real processes: the request enters server B, which holds
 * no agent, is relayed to server A (cluster.v1), runs on A's local agent, and the agent's call
 * to the engine carries the trace on as its `traceparent` header. Every process exports its own
 * spans (OTLP/HTTP, protobuf: the default protocol) to a receiver in this test, which decodes them; the engine at the boundary records headers.
 */
describe('tracing across two servers and an agent', () => {
  let receiver: OtlpReceiver;
  let engine: Awaited<ReturnType<typeof startMockEngine>>;
  let databaseUrl: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    engine = await startMockEngine();
    databaseUrl = await createTestDatabase();
  });

  afterAll(async () => {
    for (const server of servers.splice(0)) await server.dispose();
    await engine?.close();
    await receiver?.stop();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  /** The OTEL_* variables of both servers (their local agents get them too, but for the service name). */
  const tracingEnv = (serviceName: string) => ({
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_SERVICE_NAME: serviceName,
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test',
  });

  it('gives one connected trace from the gateway of B, through A\'s relay and agent, to the engine\'s request', async () => {
    const cluster = { CLUSTER_HEARTBEAT_INTERVAL_MS: '200', CLUSTER_SERVER_TIMEOUT_MS: '2000' };
    const serverA = await ServerProcess.start({
      databaseUrl, env: { ...cluster, ...tracingEnv('server-a'), LOCAL_ENGINE: 'openai', LOCAL_ENGINE_URL: engine.url, WORKER_RECONNECT_MAX_MS: '200' },
    });
    servers.push(serverA);
    const serverB = await ServerProcess.start({ databaseUrl, env: { ...cluster, ...tracingEnv('server-b'), LOCAL_AGENTS: 'false' } });
    servers.push(serverB);
    const apiKey = serverA.apiKey!;
    const slug = /\/d\/([^/\s]+)\/v1/.exec(serverA.output())![1];
    const client = new OpenAI({ baseURL: `${serverB.url}/d/${slug}/v1`, apiKey, maxRetries: 0 });
    const chat = (headers: Record<string, string> = {}) => client.chat.completions.create({
      messages: [{ role: 'user', content: 'hello #cached' }], stream: true, stream_options: { include_usage: true },
    }, { headers }).withResponse();
    // B learns of A's replica from A's registry heartbeat; until then it answers 503.
    let last: unknown;
    await within(async () => {
      const { response, data } = await chat().catch((error) => ({ response: null, data: (last = error, null) }));
      if (!data) return false;
      for await (const _ of data) { /* drain */ }
      return response!.status === 200;
    }, 60_000, 'a chat through B answered by A\'s agent', 250).catch((error) => {
      throw new Error(`${error.message}; last answer: ${String(last)}; A said: ${serverA.output().slice(-1500)}; B said: ${serverB.output().slice(-1000)}`);
    });

    // The caller's own trace: B's span continues it.
    const traceId = randomBytes(16).toString('hex');
    const callerSpanId = randomBytes(8).toString('hex');
    const { response, data } = await chat({ traceparent: `00-${traceId}-${callerSpanId}-01` });
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of data) usage = chunk.usage ?? usage;
    expect(usage?.prompt_tokens).toBe(3);
    const requestId = response.headers.get('x-request-id')!;
    const answered = response.headers.get('traceparent');
    expect(answered).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));

    const engineCall = engine.requests.find((request) => String(request.headers.traceparent ?? '').includes(traceId));
    expect(engineCall).toBeDefined();
    const engineParent = String(engineCall!.headers.traceparent).split('-')[2];

    const spans = await receiver.waitFor((received) => {
      const trace = received.filter((span) => span.traceId === traceId);
      return ['server-a', 'server-b', 'inference-worker-agent'].every((service) => trace.some((span) => span.service === service))
        && trace.some((span) => span.name.startsWith('engine '))
        && trace.some((span) => span.service === 'server-b' && span.kind === SPAN_KIND.server);
    }, 20_000, 'spans of the three processes').then(() => receiver.trace(traceId));

    const byId = new Map(spans.map((span) => [span.spanId, span]));
    const parentOf = (span: ReceivedSpan) => byId.get(span.parentSpanId);
    const one = (predicate: (span: ReceivedSpan) => boolean, what: string) => {
      const found = spans.filter(predicate);
      if (found.length !== 1) throw new Error(`expected one ${what}, found ${found.length}: ${spans.map((span) => `${span.service}/${span.name}`).join(', ')}`);
      return found[0];
    };

    // Server B: the HTTP span under the caller's, and the pipeline's spans under it.
    const http = one((span) => span.service === 'server-b' && span.kind === SPAN_KIND.server, 'HTTP server span on B');
    expect(http.parentSpanId).toBe(callerSpanId);
    expect(answered!.split('-')[2]).toBe(http.spanId);
    expect(http.attributes).toMatchObject({
      'http.request.method': 'POST', 'http.route': 'chat.completions', 'http.response.status_code': 200, 'inference.request.id': requestId,
    });
    const admit = one((span) => span.name === 'admit', 'admit span');
    expect(parentOf(admit)).toBe(http);
    const inference = one((span) => span.service === 'server-b' && span.kind === SPAN_KIND.client, 'GenAI span on B');
    expect(parentOf(inference)).toBe(http);
    expect(inference.name).toMatch(/^chat /);
    expect(inference.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat', 'gen_ai.usage.input_tokens': 3, 'gen_ai.usage.output_tokens': 2, 'gen_ai.usage.cache_read.input_tokens': 2,
      'inference.cost.basis': 'gpu_hours',
    });
    expect(inference.status.code).toBe(0);
    expect(inference.attributes['inference.replica.id']).toMatch(/^rep_/);
    expect(inference.attributes['inference.deployment.id']).toMatch(/^dep_/);
    expect(inference.attributes['inference.workspace.id']).toMatch(/^ws_/);
    const place = one((span) => span.name === 'place', 'place span');
    expect(parentOf(place)).toBe(inference);

    // Server A: the relay hop, under B's GenAI span.
    const relay = one((span) => span.service === 'server-a' && span.name === 'relay', 'relay span on A');
    expect(parentOf(relay)).toBe(inference);
    expect(relay.attributes['inference.replica.id']).toBe(inference.attributes['inference.replica.id']);

    // The agent: its job under A's relay span, its engine call under the job, and the engine's request under that.
    const job = one((span) => span.service === 'inference-worker-agent' && span.name === 'agent job', 'agent job span');
    expect(parentOf(job)).toBe(relay);
    const call = one((span) => span.service === 'inference-worker-agent' && span.name.startsWith('engine '), 'engine call span');
    expect(parentOf(call)).toBe(job);
    expect(call.kind).toBe(SPAN_KIND.client);
    expect(call.attributes).toMatchObject({ 'gen_ai.response.id': 'chatcmpl-mock', 'gen_ai.usage.cache_read.input_tokens': 2, 'server.address': engine.url });
    expect(engineParent).toBe(call.spanId);

    // One connected trace: every span's parent is in it, but for the caller's span B continued.
    const dangling = spans.filter((span) => span.parentSpanId !== callerSpanId && !byId.has(span.parentSpanId));
    expect(dangling.map((span) => `${span.service}/${span.name}`)).toEqual([]);
    expect(new Set(spans.map((span) => span.service))).toEqual(new Set(['server-a', 'server-b', 'inference-worker-agent']));
    // With no protocol variable set, the three processes sent OTLP/HTTP protobuf, the specification's default.
    const traceExports = receiver.exports.filter((sent) => sent.path === '/v1/traces');
    expect(new Set(traceExports.map((sent) => sent.contentType))).toEqual(new Set(['application/x-protobuf']));
  }, 180_000);
});
