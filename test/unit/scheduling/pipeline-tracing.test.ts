/**
 * The pipeline's spans of a request (control-plane/pipeline/request-spans.ts), read from an
 * in-memory exporter: admit, the GenAI span with its place and queue wait, their attributes
 * (GenAI usage, finish reason, replica, routing reason, cost), the traceparent the Assign gets,
 * and that nothing at all is traced when tracing is off or the request came without a span.
 */
import { SpanKind, SpanStatusCode, type SpanContext } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace';
import type { AuthenticatedKey } from '../../../control-plane/api-keys/api-key.service';
import type { DispatchRequest, Job, JobListener } from '../../../control-plane/dispatch/job';
import { AppError } from '../../../control-plane/errors/app-error';
import type { FinishedRequest } from '../../../control-plane/pipeline/finished-request';
import { InferencePipeline, type PipelineParts, type TextWork } from '../../../control-plane/pipeline/inference-pipeline';
import type { RateLimitDecision, TokenHold } from '../../../control-plane/rate-limits/rate-limit-decision';
import type { GuestAdmission } from '../../../control-plane/sharing/shared-serving';
import { readTracingSettings } from '../../../common/tracing/otel-settings';
import { parentOf, Tracing } from '../../../common/tracing/tracing';
import { RecordingListener } from './fakes';
import { chatModel, deployment, SHARED_MODEL } from './sharing-fixtures';

const KEY: AuthenticatedKey = { id: 'key_1', workspaceId: 'ws_owner', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
const OWNED = deployment({ id: 'dep_owner', slug: 'owned', workspaceId: 'ws_owner', modelId: SHARED_MODEL, sharing: 'not_shared' });
const PARENT: SpanContext = parentOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')!;

function world(options: { traced?: boolean; noReplica?: boolean } = {}) {
  let clock = 10_000;
  const exporter = new InMemorySpanExporter();
  const tracing = options.traced === false ? null
    : Tracing.start(readTracingSettings({ OTEL_TRACES_EXPORTER: 'otlp' }, 'test')!, 'test', {}, new SimpleSpanProcessor({ exporter }));
  const sent: Array<{ request: DispatchRequest; listener: JobListener }> = [];
  const job = { id: 'job_1', replicaId: 'rep_1', carrier: { replicaId: 'rep_1' }, routingReason: 'prefix_hit', finished: false, cancel() {}, consumed() {} } as unknown as Job;
  const hold = { apiKeyId: 'key_1', day: 20_000, tokens: 100, shared: false } as TokenHold;
  const decision: RateLimitDecision = { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold };
  const finished: FinishedRequest[] = [];
  const admission = { id: 'shr_1', deploymentId: 'dep_provider', ownerWorkspaceId: 'ws_provider' } as GuestAdmission;
  const parts = {
    catalog: { find: (id: string) => (id === SHARED_MODEL ? chatModel() : undefined) },
    rateLimiter: { admit: async () => decision, settle() {}, refusalNow: () => null },
    jobs: {
      dispatch(request: DispatchRequest, listener: JobListener): Job {
        if (options.noReplica) throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly');
        sent.push({ request, listener });
        return job;
      },
    },
    shared: {
      defaultMaxTokens: 64,
      resolve: () => ({ modelId: SHARED_MODEL, prices: { inputPerMillion: '0.1', outputPerMillion: '0.4' } }),
      refusalNow: () => null,
      admit: async () => admission,
      dispatch(_guest: GuestAdmission, request: DispatchRequest, listener: JobListener) {
        sent.push({ request, listener });
        return job;
      },
      finish: async () => {},
      firstToken() {},
    },
    usage: { record() {} },
    metrics: { recordTokens() {}, recordTimeToFirstToken() {} },
    observer: { requestFinished: (request: FinishedRequest) => void finished.push(request) },
    cacheSalts: { of: () => 'salt' },
    // One LoRA adapter of the owner's, attached to its deployment (as adapters/ resolves them).
    adapters: {
      onDeployment: async (workspaceId: string, on: { id: string }, model: string) => (workspaceId === 'ws_owner' && on.id === 'dep_owner' && model === 'support-bot' ? {
        ref: { name: 'ad_1.r3', displayName: 'support-bot', format: 'ADAPTER_FORMAT_GGUF', source: 'https://store/ad_1/r3?sig=secret', sha256: 'a'.repeat(64), sizeBytes: 10, rank: 8, scale: 0 },
        adapter: { id: 'ad_1', name: 'support-bot', revision: 3 },
      } : null),
    },
    tracing,
    now: () => clock,
  };
  const pipeline = new InferencePipeline(parts as unknown as PipelineParts);
  const spans = () => exporter.getFinishedSpans();
  const named = (name: string): ReadableSpan => {
    const found = spans().filter((span) => span.name === name);
    if (found.length !== 1) throw new Error(`expected one ${name} span, got ${spans().map((span) => span.name).join(', ')}`);
    return found[0];
  };
  return { pipeline, sent, finished, spans, named, advance: (ms: number) => (clock += ms) };
}

function text(overrides: Partial<TextWork> = {}): TextWork {
  return {
    endpoint: 'chat.completions', body: Buffer.from('{"messages":[]}'), fields: { max_tokens: 50 }, model: undefined, stream: true,
    includeUsage: true, deadlineUnixMs: 9_000_000, streamWindowBytes: 65_536, servedBy: () => 'chat', trace: { requestId: 'req_1', traceId: PARENT.traceId, parent: PARENT },
    ...overrides,
  };
}

const parentIdOf = (span: ReadableSpan) => span.parentSpanContext?.spanId;

describe('the pipeline\'s spans of a traced request', () => {
  test('an owner\'s stream: admit and the GenAI span under the request\'s span, place and queue wait under that, the Assign carrying the GenAI span', async () => {
    const { pipeline, sent, finished, named, advance } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    advance(5);
    ticket.dispatch(new RecordingListener());
    const [{ request, listener }] = sent;
    advance(10);
    listener.onAccepted!(true);
    advance(40);
    listener.onAccepted!(false);
    advance(5);
    listener.onChunk(Buffer.from('data: {}\n\n'));
    advance(100);
    listener.onCompleted({ promptTokens: 12, completionTokens: 30, totalTokens: 42, cachedTokens: 8 }, 'length');

    const admit = named('admit');
    expect(parentIdOf(admit)).toBe(PARENT.spanId);
    expect(admit.spanContext().traceId).toBe(PARENT.traceId);
    // Said once per trace: the request's span has its id and route; admit needs none.
    expect(admit.attributes).toEqual({});

    const inference = named(`chat ${SHARED_MODEL}`);
    expect(inference.kind).toBe(SpanKind.CLIENT);
    expect(parentIdOf(inference)).toBe(PARENT.spanId);
    expect(inference.attributes).toEqual({
      'inference.workspace.id': 'ws_owner', 'inference.deployment.id': 'dep_owner', 'gen_ai.operation.name': 'chat', 'gen_ai.request.model': SHARED_MODEL,
      'inference.cost.basis': 'gpu_hours', 'gen_ai.usage.input_tokens': 12, 'gen_ai.usage.output_tokens': 30, 'gen_ai.usage.cache_read.input_tokens': 8,
      'gen_ai.response.finish_reasons': ['length'], 'inference.replica.id': 'rep_1',
    });
    expect(inference.status.code).toBe(SpanStatusCode.UNSET);
    expect(request.traceparent).toBe(`00-${PARENT.traceId}-${inference.spanContext().spanId}-01`);

    const place = named('place');
    expect(parentIdOf(place)).toBe(inference.spanContext().spanId);
    expect(place.attributes).toEqual({ 'inference.replica.id': 'rep_1', 'inference.routing.reason': 'prefix_hit' });
    const queue = named('queue wait');
    expect(parentIdOf(queue)).toBe(inference.spanContext().spanId);

    expect(finished).toHaveLength(1);
    expect(finished[0]).toMatchObject({ traceId: PARENT.traceId, requestId: 'req_1', cachedTokens: 8 });
    expect(finished[0].phases).toEqual({ admittedMs: 0, dispatchedMs: 5, startedMs: 55, firstTokenMs: 60, endedMs: 160 });
  });

  test('a guest\'s request names its cost at the shared model\'s prices (10 × 0.1 + 30 × 0.4 per million tokens = 0.000013)', async () => {
    const { pipeline, sent, named } = world();
    const ticket = await pipeline.admitShared(KEY, text({ model: `shared/${SHARED_MODEL}` }), () => {});
    ticket.dispatch(new RecordingListener());
    sent[0].listener.onCompleted({ promptTokens: 10, completionTokens: 30, totalTokens: 40 }, 'stop');
    expect(named(`chat ${SHARED_MODEL}`).attributes).toMatchObject({
      'inference.cost.basis': 'per_token', 'inference.cost.usd': '0.000013', 'inference.shared_model': `shared/${SHARED_MODEL}`, 'inference.deployment.id': 'dep_provider',
    });
  });

  test('a request for a LoRA adapter: the GenAI span names the adapter (id, name, revision); gen_ai.request.model stays the base model, the job carries the client\'s name', async () => {
    const { pipeline, sent, named } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text({ model: 'support-bot' }));
    ticket.dispatch(new RecordingListener());
    expect(sent[0].request).toMatchObject({ model: 'support-bot', adapter: { name: 'ad_1.r3' } });
    sent[0].listener.onCompleted({ promptTokens: 3, completionTokens: 4, totalTokens: 7 }, 'stop');
    const inference = named(`chat ${SHARED_MODEL}`);
    expect(inference.attributes).toMatchObject({
      'gen_ai.request.model': SHARED_MODEL, 'inference.adapter.id': 'ad_1', 'inference.adapter.name': 'support-bot', 'inference.adapter.revision': 3,
    });
    // Never the adapter's source (a presigned link).
    expect(JSON.stringify(inference.attributes)).not.toContain('sig=');
    // The base model's requests name none.
    const base = world();
    const plain = await base.pipeline.admitText(KEY, OWNED, text());
    plain.dispatch(new RecordingListener());
    base.sent[0].listener.onCompleted({ promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 'stop');
    expect(Object.keys(base.named(`chat ${SHARED_MODEL}`).attributes).filter((name) => name.startsWith('inference.adapter'))).toEqual([]);
  });

  test('a refused request: its admit span has the refusal as its error, and nothing else is traced', async () => {
    const { pipeline, spans, named } = world();
    await expect(pipeline.admitText({ ...KEY, creditExhausted: true }, OWNED, text())).rejects.toMatchObject({ code: 'insufficient_quota' });
    const admit = named('admit');
    expect(admit.status.code).toBe(SpanStatusCode.ERROR);
    expect(admit.attributes).toEqual({ 'error.type': 'insufficient_quota' });
    expect(spans()).toHaveLength(1);
  });

  test('no replica: place fails with the code, and the GenAI span ends when the request is released', async () => {
    const { pipeline, named, finished } = world({ noReplica: true });
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    expect(() => ticket.dispatch(new RecordingListener())).toThrow(AppError);
    ticket.close();
    expect(named('place').attributes).toEqual({ 'error.type': 'no_replica_available' });
    expect(named('place').status.code).toBe(SpanStatusCode.ERROR);
    expect(parentIdOf(named(`chat ${SHARED_MODEL}`))).toBe(PARENT.spanId);
    expect(finished).toEqual([]);
  });

  test('a failed job: the GenAI span is an error with the job\'s code', async () => {
    const { pipeline, sent, named } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    ticket.dispatch(new RecordingListener());
    sent[0].listener.onFailed({ code: 'engine_error', message: 'boom', engineStatus: 500, engineBody: null, usage: undefined });
    const inference = named(`chat ${SHARED_MODEL}`);
    expect(inference.status.code).toBe(SpanStatusCode.ERROR);
    expect(inference.attributes).toMatchObject({ 'error.type': 'engine_error', 'inference.outcome': 'failed' });
  });
});

describe('nothing is traced', () => {
  test('with tracing off, even for a request that came with a span: no span, no traceparent on the job; the phases are still marked', async () => {
    const { pipeline, sent, finished } = world({ traced: false });
    const ticket = await pipeline.admitText(KEY, OWNED, text());
    ticket.dispatch(new RecordingListener());
    sent[0].listener.onCompleted({ promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 'stop');
    expect(sent[0].request.traceparent).toBeUndefined();
    expect(finished[0].phases).toEqual({ admittedMs: 0, dispatchedMs: 0, startedMs: 0, endedMs: 0 });
  });

  test('with tracing on, for a request whose span was not sampled: no span, no traceparent, the trace id all the same', async () => {
    const { pipeline, sent, spans, finished } = world();
    const unsampled = parentOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00')!;
    const ticket = await pipeline.admitText(KEY, OWNED, text({ trace: { requestId: 'req_3', traceId: unsampled.traceId, parent: unsampled } }));
    ticket.dispatch(new RecordingListener());
    sent[0].listener.onCompleted({ promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 'stop');
    expect(sent[0].request.traceparent).toBeUndefined();
    expect(spans()).toEqual([]);
    expect(finished[0]).toMatchObject({ requestId: 'req_3', traceId: unsampled.traceId });
  });

  test('with tracing on, for a request without a span (as a route that passed none): no span, no traceparent', async () => {
    const { pipeline, sent, spans, finished } = world();
    const ticket = await pipeline.admitText(KEY, OWNED, text({ trace: { requestId: 'req_2' } }));
    ticket.dispatch(new RecordingListener());
    sent[0].listener.onCompleted({ promptTokens: 1, completionTokens: 1, totalTokens: 2 }, 'stop');
    expect(sent[0].request.traceparent).toBeUndefined();
    expect(spans()).toEqual([]);
    expect(finished[0]).toMatchObject({ requestId: 'req_2', traceId: null });
  });
});
