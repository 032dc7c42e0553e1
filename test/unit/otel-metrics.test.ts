/**
 * The OpenTelemetry GenAI metrics: their settings (the standard OTEL_* variables, off unless
 * OTEL_METRICS_EXPORTER=otlp) and what each finished request records, read back through a
 * MetricReader of the SDK itself. The export over OTLP/HTTP to a receiver is
 * test/telemetry/otel-metrics.test.ts.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pino from 'pino';
import { AggregationTemporality, MeterProvider, MetricReader, type HistogramMetricData, type ResourceMetrics } from '@opentelemetry/sdk-metrics';
import { ConfigError } from '../../control-plane/config/env-fields';
import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';
import { loadOtelMetricsConfig } from '../../control-plane/telemetry/otel-metrics-config';
import { GenAiMetrics, startOtelMetrics } from '../../control-plane/telemetry/otel-metrics';

describe('loadOtelMetricsConfig', () => {
  test.each<[string, NodeJS.ProcessEnv]>([
    ['nothing set', {}],
    ['OTEL_METRICS_EXPORTER=none', { OTEL_METRICS_EXPORTER: 'none' }],
    ['an endpoint without the exporter', { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }],
    ['OTEL_SDK_DISABLED=true', { OTEL_SDK_DISABLED: 'true', OTEL_METRICS_EXPORTER: 'otlp' }],
  ])('is off with %s', (_name, env) => {
    expect(loadOtelMetricsConfig(env)).toBeNull();
  });

  test('otlp with the defaults: localhost:4318, a minute apart, cumulative', () => {
    expect(loadOtelMetricsConfig({ OTEL_METRICS_EXPORTER: 'otlp' })).toEqual({
      url: 'http://localhost:4318/v1/metrics', headers: {}, exportTimeoutMs: 10_000, exportIntervalMs: 60_000, readerTimeoutMs: 30_000,
      temporality: 'cumulative', serviceName: 'inference-platform', resourceAttributes: {},
    });
  });

  test('the base endpoint gains /v1/metrics, the metrics endpoint is taken as given; metrics headers override the shared ones', () => {
    const base = loadOtelMetricsConfig({
      OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example:4318/', OTEL_EXPORTER_OTLP_HEADERS: 'api-key=abc%20def, tenant = t1',
      OTEL_EXPORTER_OTLP_METRICS_HEADERS: 'tenant=t2', OTEL_EXPORTER_OTLP_TIMEOUT: '5000', OTEL_METRIC_EXPORT_INTERVAL: '250',
      OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: 'Delta', OTEL_SERVICE_NAME: 'gw-eu', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=prod,team=ml',
    });
    expect(base).toEqual({
      url: 'https://otel.example:4318/v1/metrics', headers: { 'api-key': 'abc def', tenant: 't2' }, exportTimeoutMs: 5_000, exportIntervalMs: 250,
      readerTimeoutMs: 250, temporality: 'delta', serviceName: 'gw-eu', resourceAttributes: { 'deployment.environment': 'prod', team: 'ml' },
    });
    // Tracing's default protocol on the shared variable: accepted, metrics still go as JSON to the same port.
    expect(loadOtelMetricsConfig({ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' })?.url).toBe('http://localhost:4318/v1/metrics');
    expect(loadOtelMetricsConfig({
      OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://ignored:4318', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://collector:9000/custom',
    })?.url).toBe('http://collector:9000/custom');
  });

  test.each<[NodeJS.ProcessEnv, RegExp]>([
    [{ OTEL_METRICS_EXPORTER: 'prometheus' }, /^OTEL_METRICS_EXPORTER: 'prometheus'/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /^OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' is not supported/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: 'http/protobuf' }, /^OTEL_EXPORTER_OTLP_METRICS_PROTOCOL:/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /^OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' is not an http/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'not a url' }, /^OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'not a url' is not a URL/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_METRIC_EXPORT_INTERVAL: '1.5' }, /^OTEL_METRIC_EXPORT_INTERVAL: expected a whole number/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_HEADERS: 'novalue' }, /^OTEL_EXPORTER_OTLP_HEADERS: 'novalue' is not key=value/],
    [{ OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: 'sometimes' }, /TEMPORALITY_PREFERENCE: 'sometimes'/],
  ])('refuses %j at start, naming the variable', (env, message) => {
    expect(() => loadOtelMetricsConfig(env)).toThrow(ConfigError);
    expect(() => loadOtelMetricsConfig(env)).toThrow(message);
  });
});

describe('the metrics export to an https receiver that wants mutual TLS', () => {
  const fixture = (name: string) => path.join(__dirname, 'tracing/fixtures', name);
  const CERT = readFileSync(fixture('localhost-cert.pem'), 'utf8');
  const KEY = readFileSync(fixture('localhost-key.pem'), 'utf8');

  test('the certificate variables (the METRICS_ form first) are read at start; a missing key is refused naming it', () => {
    const env = { OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_CERTIFICATE: '/nowhere/ignored.pem', OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE: fixture('localhost-cert.pem') };
    expect(loadOtelMetricsConfig(env)?.tls).toEqual({ ca: CERT });
    expect(() => loadOtelMetricsConfig({ ...env, OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE: fixture('localhost-cert.pem') }))
      .toThrow(new ConfigError('OTEL_EXPORTER_OTLP_CLIENT_KEY: is needed with OTEL_EXPORTER_OTLP_METRICS_CLIENT_CERTIFICATE: a client certificate goes with its private key'));
  });

  test('exports with the client certificate they name, and is refused without it', async () => {
    const received: string[] = [];
    const server = https.createServer({ cert: CERT, key: KEY, requestCert: true, rejectUnauthorized: true, ca: CERT }, (request, response) => {
      request.resume();
      request.on('end', () => {
        received.push(request.url!);
        response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const env = {
      OTEL_METRICS_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: `https://127.0.0.1:${(server.address() as AddressInfo).port}/v1/metrics`,
      OTEL_METRIC_EXPORT_INTERVAL: '60000', OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('localhost-cert.pem'),
    };
    const exportOnce = async (extra: NodeJS.ProcessEnv) => {
      const metrics = startOtelMetrics(loadOtelMetricsConfig({ ...env, ...extra })!, 'instance-1', pino({ level: 'silent' }));
      metrics.observer.requestFinished(finished());
      await metrics.shutdown();
    };
    try {
      await exportOnce({});
      expect(received).toEqual([]);
      await exportOnce({ OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: fixture('localhost-cert.pem'), OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY: fixture('localhost-key.pem') });
      expect(received).toEqual(['/v1/metrics']);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

/** Collects on demand: what the periodic reader would hand the exporter. */
class ReadNow extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

function finished(overrides: Partial<FinishedRequest> = {}): FinishedRequest {
  return {
    workspaceId: 'ws_1', apiKeyId: 'key_1', deploymentId: 'dep_a', sharedModel: null, model: 'org/chat-8b', endpoint: 'chat.completions', stream: true,
    batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null, promptTokens: 12, completionTokens: 5, cachedTokens: 0,
    startedAt: 1_000, latencyMs: 900, ttftMs: 100, replicaId: 'rep_1', requestId: 'req_1', traceId: null, phases: null, ...overrides,
  };
}

describe('GenAiMetrics', () => {
  /** GenAiMetrics as the producer of a reader bound to a provider, as startOtelMetrics wires it. */
  const exported = (temporality?: AggregationTemporality) => {
    const genAi = new GenAiMetrics('inference-platform', temporality);
    const reader = new ReadNow({ metricProducers: [genAi] });
    const provider = new MeterProvider({ readers: [reader] });
    return { reader, provider, genAi };
  };
  const read = async (reader: ReadNow) => {
    const { resourceMetrics } = await reader.collect() as { resourceMetrics: ResourceMetrics };
    const metrics = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics) as HistogramMetricData[];
    return (name: string) => metrics.find((metric) => metric.descriptor.name === name)?.dataPoints ?? [];
  };

  test('records the four GenAI histograms with the conventions\' attributes; a guest under its shared model', async () => {
    const { reader, provider, genAi } = exported();
    genAi.requestFinished(finished());
    genAi.requestFinished(finished({ stream: false, ttftMs: null, endpoint: 'completions', latencyMs: 2_000 }));
    genAi.requestFinished(finished({ deploymentId: 'dep_owner', sharedModel: 'shared/org/chat-8b', completionTokens: 1, ttftMs: 50, latencyMs: 60 }));
    genAi.requestFinished(finished({ endpoint: 'embeddings', stream: false, ttftMs: null, promptTokens: 30, completionTokens: 0, latencyMs: 40 }));
    // A batch line: its tokens, not its wait for free capacity.
    genAi.requestFinished(finished({ endpoint: 'completions', batchId: 'batch_1', stream: false, ttftMs: null, promptTokens: 8, latencyMs: 90_000 }));
    const points = await read(reader);
    const chat = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'inference-platform', 'gen_ai.request.model': 'org/chat-8b', 'inference.deployment': 'dep_a' };

    const durations = points('gen_ai.server.request.duration');
    expect(durations.map((point) => point.attributes)).toEqual(expect.arrayContaining([
      chat, { ...chat, 'gen_ai.operation.name': 'text_completion' }, { ...chat, 'inference.deployment': 'shared/org/chat-8b' },
      { ...chat, 'gen_ai.operation.name': 'embeddings' },
    ]));
    expect(durations.find((point) => point.attributes['gen_ai.operation.name'] === 'text_completion')?.value).toMatchObject({ count: 1, sum: 2 });

    // First token: the two streams; per output token: only the one with 2 tokens or more, (0.9 - 0.1) / 4.
    const ttft = points('gen_ai.server.time_to_first_token');
    expect(ttft.map((point) => [point.attributes['inference.deployment'], point.value.sum])).toEqual(expect.arrayContaining([['dep_a', 0.1], ['shared/org/chat-8b', 0.05]]));
    expect(ttft).toHaveLength(2);
    const tpot = points('gen_ai.server.time_per_output_token');
    expect(tpot).toHaveLength(1);
    expect(tpot[0].value.sum).toBeCloseTo(0.2, 9);
    expect(tpot[0].attributes).toEqual(chat);

    const tokens = points('gen_ai.client.token.usage');
    expect(tokens.find((point) => point.attributes['gen_ai.operation.name'] === 'text_completion' && point.attributes['gen_ai.token.type'] === 'input')?.value)
      .toMatchObject({ count: 2, sum: 20 });
    const input = tokens.find((point) => point.attributes['gen_ai.token.type'] === 'input' && point.attributes['gen_ai.operation.name'] === 'chat'
      && point.attributes['inference.deployment'] === 'dep_a');
    expect(input?.value).toMatchObject({ count: 1, sum: 12 });
    // Embeddings have no output tokens to record.
    expect(tokens.filter((point) => point.attributes['gen_ai.operation.name'] === 'embeddings').map((point) => point.attributes['gen_ai.token.type'])).toEqual(['input']);
    await provider.shutdown();
  });

  test('a failed or canceled request has error.type from a closed set, and no first-token or per-token point', async () => {
    const { reader, provider, genAi } = exported();
    genAi.requestFinished(finished({ outcome: 'failed', finishReason: null, errorCode: 'engine_error', promptTokens: 0, completionTokens: 0 }));
    genAi.requestFinished(finished({ outcome: 'failed', finishReason: null, errorCode: 'something "new"' }));
    genAi.requestFinished(finished({ outcome: 'canceled', errorCode: 'canceled' }));
    const points = await read(reader);
    expect(points('gen_ai.server.request.duration').map((point) => point.attributes['error.type']).sort()).toEqual(['_OTHER', 'canceled', 'engine_error']);
    expect(points('gen_ai.server.time_to_first_token')).toEqual([]);
    expect(points('gen_ai.server.time_per_output_token')).toEqual([]);
    // Usage known (the canceled stream's, the unknown failure's): counted; the engine error reported none.
    expect(points('gen_ai.client.token.usage').find((point) => point.attributes['gen_ai.token.type'] === 'input')?.value).toMatchObject({ count: 2, sum: 24 });
    await provider.shutdown();
  });

  test('buckets each value by the convention\'s boundaries; delta temporality starts each collection from zero', async () => {
    const { reader, provider, genAi } = exported(AggregationTemporality.DELTA);
    genAi.requestFinished(finished({ latencyMs: 15 }));
    genAi.requestFinished(finished({ latencyMs: 30 }));
    genAi.requestFinished(finished({ latencyMs: 100_000 }));
    let [duration] = (await read(reader))('gen_ai.server.request.duration');
    expect(duration.value).toMatchObject({ count: 3, min: 0.015, max: 100 });
    // Boundaries 0.01, 0.02, 0.04, …, 81.92: 0.015 in (0.01, 0.02], 0.03 in (0.02, 0.04], 100 above them all.
    expect(duration.value.buckets.counts).toEqual([0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    const points = await read(reader);
    expect(points('gen_ai.server.request.duration')).toEqual([]);
    genAi.requestFinished(finished({ latencyMs: 50 }));
    [duration] = (await read(reader))('gen_ai.server.request.duration');
    expect(duration.value).toMatchObject({ count: 1, sum: 0.05 });
    await provider.shutdown();
  });
});
