import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';
import { Metrics, NO_DEPLOYMENT } from '../../control-plane/telemetry/metrics';
import { isLoopbackAddress } from '../../gateway/http/metrics.route';
import { RequestIds } from '../../gateway/http/request-id';
import { ROUTE_LABELS, routeLabel } from '../../gateway/route-label';
import { parsePrometheusText, sampleValue } from './support/prometheus-text';

/** A settled owner's chat stream; `overrides` make it another. */
function finished(overrides: Partial<FinishedRequest> = {}): FinishedRequest {
  return {
    workspaceId: 'ws_1', apiKeyId: 'key_1', deploymentId: 'dep_a', sharedModel: null, model: 'org/chat-8b', endpoint: 'chat.completions', stream: true,
    batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null, promptTokens: 10, completionTokens: 5, cachedTokens: 0,
    startedAt: 1_000, latencyMs: 500, ttftMs: 100, replicaId: 'rep_1', requestId: 'req_1', traceId: null, phases: null, ...overrides,
  };
}

describe('Metrics', () => {
  const metricsInTest: Metrics[] = [];
  const create = (options?: Partial<ConstructorParameters<typeof Metrics>[0]>) => {
    const metrics = new Metrics({ routes: ROUTE_LABELS, ...options });
    metricsInTest.push(metrics);
    return metrics;
  };
  const scrape = async (metrics: Metrics) => parsePrometheusText((await metrics.render()).body);

  afterAll(() => {
    for (const metrics of metricsInTest) metrics.close();
  });

  it('counts requests by deployment, route and status, and fills the route histograms', async () => {
    const metrics = create();
    metrics.recordRequest('dep_a', 'chat.completions', 200, 0.004);
    metrics.recordRequest('dep_a', 'chat.completions', 200, 0.3);
    metrics.recordRequest('dep_a', 'chat.completions', 400, 0.001);
    metrics.recordRequest('dep_b', 'completions', 200, 200);
    metrics.recordRequest(NO_DEPLOYMENT, 'chat.completions', 401, 0.0005);
    metrics.recordTimeToFirstToken('chat.completions', 0.02);
    const samples = await scrape(metrics);

    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'dep_a', route: 'chat.completions', status: '200' })).toBe(2);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'dep_a', route: 'chat.completions', status: '400' })).toBe(1);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'dep_b', route: 'completions', status: '200' })).toBe(1);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'none', route: 'chat.completions', status: '401' })).toBe(1);

    const chat = { route: 'chat.completions' };
    expect(sampleValue(samples, 'inference_request_duration_seconds_count', chat)).toBe(4);
    expect(sampleValue(samples, 'inference_request_duration_seconds_sum', chat)).toBeCloseTo(0.3055, 6);
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { ...chat, le: '0.005' })).toBe(3);
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { ...chat, le: '0.25' })).toBe(3);
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { ...chat, le: '0.5' })).toBe(4);
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { ...chat, le: '+Inf' })).toBe(4);
    // Above the largest bound: only +Inf and the count hold it.
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { route: 'completions', le: '120' })).toBe(0);
    expect(sampleValue(samples, 'inference_request_duration_seconds_bucket', { route: 'completions', le: '+Inf' })).toBe(1);
    expect(sampleValue(samples, 'inference_time_to_first_token_seconds_count', chat)).toBe(1);
    expect(sampleValue(samples, 'inference_time_to_first_token_seconds_bucket', { ...chat, le: '0.01' })).toBe(0);
    expect(sampleValue(samples, 'inference_time_to_first_token_seconds_bucket', { ...chat, le: '0.025' })).toBe(1);
  });

  it('sums tokens per deployment, model and kind, from finished requests that reported usage', async () => {
    const metrics = create();
    metrics.requestFinished(finished({ promptTokens: 10, completionTokens: 5 }));
    metrics.requestFinished(finished({ promptTokens: 7, completionTokens: 3, stream: false, ttftMs: null }));
    metrics.requestFinished(finished({ deploymentId: 'dep_b', outcome: 'failed', finishReason: null, errorCode: 'pod_crash', promptTokens: 0, completionTokens: 0 }));
    const samples = await scrape(metrics);
    expect(sampleValue(samples, 'inference_tokens_total', { deployment: 'dep_a', model: 'org/chat-8b', kind: 'prompt' })).toBe(17);
    expect(sampleValue(samples, 'inference_tokens_total', { deployment: 'dep_a', model: 'org/chat-8b', kind: 'completion' })).toBe(8);
    // A request with no usage adds no token series.
    expect(sampleValue(samples, 'inference_tokens_total', { deployment: 'dep_b', kind: 'prompt' })).toBeUndefined();
  });

  it('fills the per-deployment latency, first-token and per-output-token histograms of finished requests', async () => {
    const metrics = create();
    // Stream: 0.1 s to the first token, 0.5 s in all, 5 tokens: (0.5 - 0.1) / 4 = 0.1 s per token after the first.
    metrics.requestFinished(finished());
    // Answered in one piece: latency only.
    metrics.requestFinished(finished({ stream: false, ttftMs: null, latencyMs: 3_000, completionTokens: 40 }));
    // One token: a first token, no time per output token.
    metrics.requestFinished(finished({ latencyMs: 60, ttftMs: 40, completionTokens: 1 }));
    // Canceled after its first token: latency and first token, no time per output token (its end is not its last token's).
    metrics.requestFinished(finished({ outcome: 'canceled', errorCode: 'canceled', latencyMs: 9_000, ttftMs: 20, completionTokens: 300 }));
    const samples = await scrape(metrics);
    const series = { deployment: 'dep_a', model: 'org/chat-8b' };
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', series)).toBe(4);
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_sum', series)).toBeCloseTo(12.56, 6);
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_bucket', { ...series, le: '0.5' })).toBe(2);
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_bucket', { ...series, le: '4' })).toBe(3);
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_bucket', { ...series, le: '+Inf' })).toBe(4);
    expect(sampleValue(samples, 'inference_request_time_to_first_token_seconds_count', series)).toBe(3);
    expect(sampleValue(samples, 'inference_request_time_to_first_token_seconds_sum', series)).toBeCloseTo(0.16, 6);
    expect(sampleValue(samples, 'inference_request_time_to_first_token_seconds_bucket', { ...series, le: '0.025' })).toBe(1);
    expect(sampleValue(samples, 'inference_request_time_to_first_token_seconds_bucket', { ...series, le: '0.05' })).toBe(2);
    expect(sampleValue(samples, 'inference_request_time_per_output_token_seconds_count', series)).toBe(1);
    expect(sampleValue(samples, 'inference_request_time_per_output_token_seconds_sum', series)).toBeCloseTo(0.1, 9);
    expect(sampleValue(samples, 'inference_request_time_per_output_token_seconds_bucket', { ...series, le: '0.075' })).toBe(0);
    expect(sampleValue(samples, 'inference_request_time_per_output_token_seconds_bucket', { ...series, le: '0.1' })).toBe(1);
  });

  it('counts a batch line\'s outcome and tokens, but not its wait for free capacity as a latency', async () => {
    const metrics = create();
    metrics.requestFinished(finished({ batchId: 'batch_1', stream: false, ttftMs: null, latencyMs: 90_000 }));
    const samples = await scrape(metrics);
    const series = { deployment: 'dep_a', model: 'org/chat-8b' };
    expect(sampleValue(samples, 'inference_requests_finished_total', { ...series, outcome: 'succeeded' })).toBe(1);
    expect(sampleValue(samples, 'inference_tokens_total', { ...series, kind: 'completion' })).toBe(5);
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', series)).toBe(0);
  });

  it('counts finished requests by outcome, finish reason and error, from closed sets', async () => {
    const metrics = create();
    metrics.requestFinished(finished());
    metrics.requestFinished(finished());
    metrics.requestFinished(finished({ finishReason: 'length' }));
    metrics.requestFinished(finished({ finishReason: 'tool_calls' }));
    metrics.requestFinished(finished({ finishReason: 'made_up_by_an_engine"}' }));
    metrics.requestFinished(finished({ outcome: 'failed', finishReason: null, errorCode: 'engine_error' }));
    metrics.requestFinished(finished({ outcome: 'failed', finishReason: null, errorCode: 'a code no one listed' }));
    metrics.requestFinished(finished({ outcome: 'canceled', finishReason: 'abort', errorCode: 'canceled' }));
    const samples = await scrape(metrics);
    const count = (labels: Record<string, string>) => sampleValue(samples, 'inference_requests_finished_total', { deployment: 'dep_a', model: 'org/chat-8b', ...labels });
    expect(count({ outcome: 'succeeded', finish_reason: 'stop', error: 'none' })).toBe(2);
    expect(count({ outcome: 'succeeded', finish_reason: 'length', error: 'none' })).toBe(1);
    expect(count({ outcome: 'succeeded', finish_reason: 'tool_calls', error: 'none' })).toBe(1);
    expect(count({ outcome: 'succeeded', finish_reason: 'other', error: 'none' })).toBe(1);
    expect(count({ outcome: 'failed', finish_reason: 'none', error: 'engine_error' })).toBe(1);
    expect(count({ outcome: 'failed', finish_reason: 'none', error: 'other' })).toBe(1);
    expect(count({ outcome: 'canceled', finish_reason: 'abort', error: 'canceled' })).toBe(1);
    expect(samples.filter((sample) => sample.name === 'inference_requests_finished_total')).toHaveLength(7);
    expect(samples.some((sample) => Object.values(sample.labels).some((value) => value.includes('made_up') || value.includes('no one')))).toBe(false);
  });

  it('labels a guest\'s request with the shared model it called, never the owner\'s deployment that served it', async () => {
    const metrics = create();
    metrics.requestFinished(finished({ deploymentId: 'dep_owner', sharedModel: 'shared/org/chat-8b' }));
    metrics.requestFinished(finished({ deploymentId: 'dep_owner' }));
    const samples = await scrape(metrics);
    const guest = { deployment: 'shared/org/chat-8b', model: 'org/chat-8b' };
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', guest)).toBe(1);
    expect(sampleValue(samples, 'inference_requests_finished_total', { ...guest, outcome: 'succeeded' })).toBe(1);
    expect(sampleValue(samples, 'inference_tokens_total', { ...guest, kind: 'prompt' })).toBe(10);
    // The owner's own request is the only one under its deployment id.
    expect(sampleValue(samples, 'inference_request_e2e_latency_seconds_count', { deployment: 'dep_owner' })).toBe(1);
  });

  it('reads queue depth and replicas from their sources at scrape time, and drops what is gone', async () => {
    let depth = [{ deployment: 'dep_a', depth: 3 }, { deployment: 'dep_b', depth: 0 }];
    const metrics = create({
      queueDepth: async () => depth,
      replicas: async () => [{ deployment: 'dep_a', state: 'Running', count: 2 }, { deployment: 'dep_a', state: 'Creating', count: 1 }],
    });
    let samples = await scrape(metrics);
    expect(sampleValue(samples, 'inference_queue_depth', { deployment: 'dep_a' })).toBe(3);
    expect(sampleValue(samples, 'inference_queue_depth', { deployment: 'dep_b' })).toBe(0);
    expect(sampleValue(samples, 'inference_replicas', { deployment: 'dep_a', state: 'Running' })).toBe(2);
    expect(sampleValue(samples, 'inference_replicas', { deployment: 'dep_a', state: 'Creating' })).toBe(1);
    depth = [{ deployment: 'dep_b', depth: 4 }];
    samples = await scrape(metrics);
    expect(sampleValue(samples, 'inference_queue_depth', { deployment: 'dep_a' })).toBeUndefined();
    expect(sampleValue(samples, 'inference_queue_depth', { deployment: 'dep_b' })).toBe(4);
  });

  it('counts a route outside the closed set it was given as other', async () => {
    const metrics = create({ routes: ['chat.completions'] });
    metrics.recordRequest('dep_a', 'chat.completions', 200, 0.001);
    metrics.recordRequest('dep_a', '/wp-admin/<script>', 404, 0.001);
    metrics.recordTimeToFirstToken('made-up', 0.01);
    const samples = await scrape(metrics);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'dep_a', route: 'chat.completions', status: '200' })).toBe(1);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: 'dep_a', route: 'other', status: '404' })).toBe(1);
    expect(sampleValue(samples, 'inference_requests_total', { route: '/wp-admin/<script>' })).toBeUndefined();
    expect(sampleValue(samples, 'inference_time_to_first_token_seconds_count', { route: 'other' })).toBe(1);
  });

  it('still answers a scrape when a gauge source fails, and logs it', async () => {
    const warnings: unknown[] = [];
    const logger = { warn: (fields: unknown) => warnings.push(fields) } as unknown as import('pino').Logger;
    const metrics = create({ queueDepth: async () => { throw new Error('database gone'); }, logger });
    metrics.recordRequest('dep_a', 'models', 200, 0.001);
    const samples = await scrape(metrics);
    expect(samples.some((sample) => sample.name === 'inference_queue_depth')).toBe(false);
    expect(sampleValue(samples, 'inference_requests_total', { route: 'models' })).toBe(1);
    expect(warnings).toHaveLength(1);
  });

  it('reads the engine signals per replica at scrape time; a replica gone takes its series with it', async () => {
    let rows = [
      { deployment: 'dep_a', replica: 'rep_1', running: 12, waiting: 3, kvCacheUsage: 0.9316, prefixCacheHitRate: 0.7753 },
      { deployment: 'dep_a', replica: 'rep_2', running: 0, waiting: 0, kvCacheUsage: 0, prefixCacheHitRate: null },
    ];
    const metrics = create({ replicaEngines: async () => rows });
    let samples = await scrape(metrics);
    const one = { deployment: 'dep_a', replica: 'rep_1' };
    expect(sampleValue(samples, 'inference_replica_engine_requests_running', one)).toBe(12);
    expect(sampleValue(samples, 'inference_replica_engine_requests_waiting', one)).toBe(3);
    expect(sampleValue(samples, 'inference_replica_kv_cache_usage_ratio', one)).toBe(0.9316);
    expect(sampleValue(samples, 'inference_replica_prefix_cache_hit_ratio', one)).toBe(0.7753);
    const two = { deployment: 'dep_a', replica: 'rep_2' };
    expect(sampleValue(samples, 'inference_replica_engine_requests_running', two)).toBe(0);
    // No hit rate known yet: no series rather than a made-up 0.
    expect(sampleValue(samples, 'inference_replica_prefix_cache_hit_ratio', two)).toBeUndefined();
    rows = [rows[1]];
    samples = await scrape(metrics);
    for (const name of ['inference_replica_engine_requests_running', 'inference_replica_engine_requests_waiting',
      'inference_replica_kv_cache_usage_ratio', 'inference_replica_prefix_cache_hit_ratio']) {
      expect(sampleValue(samples, name, one)).toBeUndefined();
    }
    expect(sampleValue(samples, 'inference_replica_engine_requests_waiting', two)).toBe(0);
  });

  it('counts autoscaler decisions and spend through their public methods', async () => {
    const metrics = create();
    metrics.recordScalingDecision('dep_a', 'scale_up');
    metrics.recordScalingDecision('dep_a', 'scale_up');
    metrics.recordScalingDecision('dep_a', 'hold');
    metrics.recordScalingDecision('dep_a', 'Drop Table; --');
    metrics.recordScalingDecision('dep_a', 'scale_up', 'slo');
    metrics.recordScalingDecision('dep_a', 'hold', 'Drop Table; --');
    metrics.recordSpend('dep_a', 0.25);
    metrics.recordSpend('dep_a', 1.5);
    expect(() => metrics.recordSpend('dep_a', -1)).toThrow(RangeError);
    expect(() => metrics.recordSpend('dep_a', Number.NaN)).toThrow(RangeError);
    const samples = await scrape(metrics);
    // The policy label: `concurrency` when not named (the policy before SLOs), a name outside the policies counted as `other`.
    expect(sampleValue(samples, 'inference_autoscaler_decisions_total', { deployment: 'dep_a', action: 'scale_up', policy: 'concurrency' })).toBe(2);
    expect(sampleValue(samples, 'inference_autoscaler_decisions_total', { deployment: 'dep_a', action: 'hold', policy: 'concurrency' })).toBe(1);
    expect(sampleValue(samples, 'inference_autoscaler_decisions_total', { deployment: 'dep_a', action: 'other', policy: 'concurrency' })).toBe(1);
    expect(sampleValue(samples, 'inference_autoscaler_decisions_total', { deployment: 'dep_a', action: 'scale_up', policy: 'slo' })).toBe(1);
    expect(sampleValue(samples, 'inference_autoscaler_decisions_total', { deployment: 'dep_a', action: 'hold', policy: 'other' })).toBe(1);
    expect(sampleValue(samples, 'inference_spend_usd_total', { deployment: 'dep_a' })).toBe(1.75);
  });

  it('keeps a registry per instance, with the default process metrics prefixed', async () => {
    const first = create();
    const second = create();
    first.recordRequest('dep_a', 'completions', 200, 0.01);
    expect(sampleValue(await scrape(first), 'inference_requests_total', { deployment: 'dep_a' })).toBe(1);
    const secondSamples = await scrape(second);
    expect(sampleValue(secondSamples, 'inference_requests_total', { deployment: 'dep_a' })).toBeUndefined();
    expect(sampleValue(secondSamples, 'inference_process_cpu_user_seconds_total')).toBeGreaterThanOrEqual(0);
    expect(secondSamples.some((sample) => sample.name.startsWith('inference_nodejs_heap_size_total_bytes'))).toBe(true);
  });

  it('records a request in well under 3 µs (request id, status, duration, first token, its finished-request series)', () => {
    const metrics = create();
    const ids = new RequestIds();
    const deployments = Array.from({ length: 20 }, (_, index) => `dep_${index.toString(36).padStart(8, '0')}`);
    const statuses = [200, 200, 200, 200, 400, 429, 503];
    const finishedRequests = deployments.map((deploymentId) => finished({ deploymentId, promptTokens: 40, completionTokens: 120 }));
    const perRequest = (iteration: number) => {
      const deployment = deployments[iteration % deployments.length];
      const route = (iteration & 1) === 0 ? 'chat.completions' : 'completions';
      const id = ids.from(undefined);
      const receivedAt = performance.now();
      metrics.recordTimeToFirstToken(route, (performance.now() - receivedAt) / 1000);
      metrics.requestFinished(finishedRequests[iteration % finishedRequests.length]);
      metrics.recordRequest(deployment, route, statuses[iteration % statuses.length], (performance.now() - receivedAt) / 1000 + id.length * 1e-6);
    };
    const iterations = 200_000;
    let best = Number.POSITIVE_INFINITY;
    for (let round = 0; round < 5; round++) {
      const startedAt = process.hrtime.bigint();
      for (let iteration = 0; iteration < iterations; iteration++) perRequest(iteration);
      best = Math.min(best, Number(process.hrtime.bigint() - startedAt) / iterations);
    }
    process.stdout.write(`telemetry: ${best.toFixed(0)} ns of recording per request (best of 5 × ${iterations})\n`);
    expect(best).toBeLessThan(3_000);
  });
});

describe('route labels', () => {
  it('are the closed set dashboards know: the endpoint tables\' labels and the other surfaces\'', () => {
    expect([...ROUTE_LABELS].sort()).toEqual([
      'agent_download', 'batch.files', 'batches', 'chat.completions', 'completions', 'embeddings', 'files', 'graphql', 'healthz',
      'images.edits', 'images.generations', 'metrics', 'models', 'other', 'readyz', 'requests', 'responses', 'shared', 'uploads', 'v1.other',
      'videos', 'videos.retrieve',
    ]);
  });

  it.each([
    ['POST', '/d/llama-3fa9c2/v1/chat/completions', 'chat.completions'],
    ['POST', '/d/llama-3fa9c2/v1/completions', 'completions'],
    ['POST', '/d/sdxl-1/v1/images/generations', 'images.generations'],
    ['POST', '/d/sdxl-1/v1/images/edits', 'images.edits'],
    ['POST', '/d/wan-1/v1/videos', 'videos'],
    ['POST', '/d/wan-1/v1/videos/generations', 'videos'],
    ['GET', '/d/wan-1/v1/videos', 'videos.retrieve'],
    ['GET', '/d/wan-1/v1/videos/req_123/content', 'videos.retrieve'],
    ['GET', '/d/wan-1/v1/requests/req_123', 'requests'],
    ['GET', '/d/wan-1/v1/models/some%20model', 'models'],
    ['POST', '/d/wan-1/v1/embeddings', 'embeddings'],
    ['POST', '/d/wan-1/v1/audio/speech', 'v1.other'],
    ['POST', '/d/wan-1/v1', 'v1.other'],
    ['POST', '/graphql', 'graphql'],
    ['GET', '/files/outputs/a/b.png', 'files'],
    ['GET', '/healthz', 'healthz'],
    ['GET', '/readyz', 'readyz'],
    ['GET', '/metrics', 'metrics'],
    ['POST', '/shared/v1/chat/completions', 'shared'],
    ['GET', '/wp-admin/<script>', 'other'],
    ['GET', '/dx/anything', 'other'],
  ])('%s %s → %s', (method, path, label) => {
    expect(routeLabel(method, path)).toBe(label);
  });
});

describe('request ids', () => {
  it('keeps a sane incoming id and generates unique ones otherwise', () => {
    const ids = new RequestIds();
    expect(ids.from('trace-abc_123:XYZ')).toBe('trace-abc_123:XYZ');
    expect(ids.from('x'.repeat(128))).toBe('x'.repeat(128));
    for (const insane of ['x'.repeat(129), '', 'two words', 'a, b', 'tab\there', 'caf\u00e9', ['a', 'b']]) {
      expect(ids.from(insane)).toMatch(/^req_[0-9a-f]{12}_[0-9a-z]+$/);
    }
    const generated = new Set(Array.from({ length: 1000 }, () => ids.next()));
    expect(generated.size).toBe(1000);
    expect(new RequestIds().next().slice(0, 17)).not.toBe(ids.next().slice(0, 17));
  });
});

describe('loopback addresses', () => {
  it.each([
    ['127.0.0.1', true], ['127.8.9.10', true], ['::1', true], ['::ffff:127.0.0.1', true],
    ['10.0.0.1', false], ['::ffff:10.0.0.1', false], ['192.168.1.2', false], ['fe80::1', false], ['::', false], [undefined, false], ['127.example', false],
  ])('%s → %s', (address, loopback) => {
    expect(isLoopbackAddress(address)).toBe(loopback);
  });
});
