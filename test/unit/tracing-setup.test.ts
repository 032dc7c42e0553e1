/**
 * Tracing's setup from the standard OTEL_* variables: off unless an exporter is configured, the
 * endpoint, sampler, resource and batch settings as OpenTelemetry defines them, and a bad value
 * refused at start with an error naming its variable (a ConfigError on the server: exit 2).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace';
import { readTracingSettings, tracingEnvForChildren } from '../../common/tracing/otel-settings';
import { parentOf, SpanKind, traceparentOf, Tracing } from '../../common/tracing/tracing';
import { ConfigError } from '../../control-plane/config/env-fields';
import { loadFullControlPlaneConfig } from '../../control-plane/full-config';
import { loadTracingConfig } from '../../control-plane/telemetry/tracing-config';

const read = (env: NodeJS.ProcessEnv) => readTracingSettings(env, 'inference-platform');

describe('when tracing is on', () => {
  test.each<[string, NodeJS.ProcessEnv]>([
    ['nothing set', {}],
    ['an exporter of none, even with an endpoint', { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }],
    ['the SDK disabled', { OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }],
    ['only settings that configure no exporter', { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on', OTEL_BSP_SCHEDULE_DELAY: '10' }],
  ])('off: %s', (_name, env) => {
    expect(read(env)).toBeNull();
  });

  test('on with an OTLP endpoint: the traces path is added to the base endpoint, a traces endpoint is used as it is', () => {
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' })?.endpoint).toBe('http://collector:4318/v1/traces');
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otlp.example.com/otlp' })?.endpoint).toBe('https://otlp.example.com/otlp/v1/traces');
    expect(read({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://tempo:4318/custom' })?.endpoint).toBe('http://tempo:4318/custom');
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp' })?.endpoint).toBe('http://localhost:4318/v1/traces');
  });

  test('defaults: the service name, parent-based always-on sampling, OpenTelemetry\'s batch settings', () => {
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp' })).toEqual({
      serviceName: 'inference-platform', resourceAttributes: {}, endpoint: 'http://localhost:4318/v1/traces', protocol: 'http/protobuf', headers: {}, exportTimeoutMs: 10_000,
      sampler: { kind: 'always_on', parentBased: true, ratio: 1 },
      batch: { scheduleDelayMs: 5_000, maxQueueSize: 2_048, maxExportBatchSize: 512, exportTimeoutMs: 30_000 },
    });
  });

  test('the resource, headers, timeout, sampler and batch settings as given', () => {
    const settings = read({
      OTEL_TRACES_EXPORTER: 'otlp', OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,deployment.environment=prod,team=a%20b',
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=one,x-tenant=t', OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-api-key=two', OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '2500',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25',
      OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_BSP_MAX_QUEUE_SIZE: '100', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '50', OTEL_BSP_EXPORT_TIMEOUT: '1000',
    })!;
    expect(settings.serviceName).toBe('from-resource');
    expect(settings.resourceAttributes).toEqual({ 'service.name': 'from-resource', 'deployment.environment': 'prod', team: 'a b' });
    expect(settings.headers).toEqual({ 'x-api-key': 'two', 'x-tenant': 't' });
    expect(settings.exportTimeoutMs).toBe(2_500);
    expect(settings.sampler).toEqual({ kind: 'traceidratio', parentBased: true, ratio: 0.25 });
    expect(settings.batch).toEqual({ scheduleDelayMs: 100, maxQueueSize: 100, maxExportBatchSize: 50, exportTimeoutMs: 1_000 });
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'named', OTEL_RESOURCE_ATTRIBUTES: 'service.name=other' })?.serviceName).toBe('named');
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: 'always_off' })?.sampler).toEqual({ kind: 'always_off', parentBased: false, ratio: 1 });
  });

  test('OTLP over HTTP with protobuf bodies unless a protocol variable says http/json; the traces one wins', () => {
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp' })?.protocol).toBe('http/protobuf');
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol).toBe('http/json');
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' })?.protocol).toBe('http/protobuf');
    expect(read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' })?.protocol).toBe('http/json');
  });

  test('local agents get the same variables but the service name', () => {
    expect(tracingEnvForChildren({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'server', OTEL_TRACES_SAMPLER: 'always_on', PATH: '/bin' }))
      .toEqual({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_SAMPLER: 'always_on' });
  });
});

describe('a value the server refuses is a ConfigError naming its variable', () => {
  test.each<[string, string]>([
    ['OTEL_TRACES_EXPORTER', 'jaeger'],
    ['OTEL_TRACES_EXPORTER', 'otlp,console'],
    ['OTEL_SDK_DISABLED', 'maybe'],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', 'collector:4318'],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'ftp://collector/v1/traces'],
    ['OTEL_EXPORTER_OTLP_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'grpc'],
    ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'http/xml'],
    ['OTEL_EXPORTER_OTLP_HEADERS', 'no-equals-sign'],
    ['OTEL_EXPORTER_OTLP_TIMEOUT', '10s'],
    ['OTEL_RESOURCE_ATTRIBUTES', 'team=%E0%A4%A'],
    ['OTEL_TRACES_SAMPLER', 'jaeger_remote'],
    ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
    ['OTEL_BSP_SCHEDULE_DELAY', '-5'],
    ['OTEL_BSP_MAX_QUEUE_SIZE', '0'],
  ])('%s=%s', (variable, value) => {
    const env: NodeJS.ProcessEnv = { OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: variable === 'OTEL_TRACES_SAMPLER_ARG' ? 'traceidratio' : undefined, [variable]: value };
    let thrown: unknown;
    try {
      loadTracingConfig(env);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as Error).message).toMatch(new RegExp(`^invalid tracing configuration: ${variable}: `));
  });

  test('checked even while tracing is off, and a batch larger than the queue is refused', () => {
    expect(() => loadTracingConfig({ OTEL_TRACES_SAMPLER: 'sometimes' })).toThrow(/OTEL_TRACES_SAMPLER: 'sometimes' is not supported/);
    expect(() => loadTracingConfig({ OTEL_BSP_MAX_QUEUE_SIZE: '10', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '20' })).toThrow(/OTEL_BSP_MAX_EXPORT_BATCH_SIZE: 20 is more than OTEL_BSP_MAX_QUEUE_SIZE/);
  });

  test('the server\'s whole configuration refuses it at start', () => {
    expect(() => loadFullControlPlaneConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(ConfigError);
    expect(loadFullControlPlaneConfig({}).tracing).toEqual({ settings: null, agentEnv: {} });
  });
});

describe('an https endpoint\'s certificates (OTEL_EXPORTER_OTLP_CERTIFICATE, …_CLIENT_CERTIFICATE, …_CLIENT_KEY)', () => {
  const fixture = (name: string) => path.join(__dirname, 'tracing/fixtures', name);
  const CERT = readFileSync(fixture('localhost-cert.pem'), 'utf8');
  const KEY = readFileSync(fixture('localhost-key.pem'), 'utf8');
  const on = { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector:4318' };

  test('none set: no tls; each file read at start, the TRACES_ form first, paths relative to the working directory', () => {
    expect(read(on)?.tls).toBeUndefined();
    expect(read({ ...on, OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('localhost-cert.pem') })?.tls).toEqual({ ca: CERT });
    const relative = path.relative(process.cwd(), fixture('localhost-key.pem'));
    expect(read({
      ...on, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: '/nowhere/ignored.pem', OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: fixture('localhost-cert.pem'),
      OTEL_EXPORTER_OTLP_CLIENT_KEY: relative,
    })?.tls).toEqual({ cert: CERT, key: KEY });
  });

  test.each<[string, NodeJS.ProcessEnv, string]>([
    ['a file that cannot be read', { OTEL_EXPORTER_OTLP_CERTIFICATE: '/nowhere/ca.pem' }, 'OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read \'/nowhere/ca.pem\' (ENOENT)'],
    ['a client certificate without its key', { OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: fixture('localhost-cert.pem') }, 'OTEL_EXPORTER_OTLP_CLIENT_KEY: is needed with OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE'],
    ['a key without its certificate', { OTEL_EXPORTER_OTLP_CLIENT_KEY: fixture('localhost-key.pem') }, 'OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: is needed with OTEL_EXPORTER_OTLP_CLIENT_KEY'],
    ['a CA that is not PEM', { OTEL_EXPORTER_OTLP_CERTIFICATE: path.join(__dirname, 'tracing-setup.test.ts') }, 'OTEL_EXPORTER_OTLP_CERTIFICATE: is not a PEM file Node can use'],
    ['a key that is not the certificate\'s', { OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: fixture('localhost-cert.pem'), OTEL_EXPORTER_OTLP_CLIENT_KEY: fixture('localhost-cert.pem') }, 'OTEL_EXPORTER_OTLP_CLIENT_KEY: is not a PEM file Node can use'],
  ])('%s refuses the start, naming the variable (even while tracing is off)', (_name, env, message) => {
    expect(() => loadTracingConfig({ ...on, ...env })).toThrow(`invalid tracing configuration: ${message}`);
    expect(() => loadTracingConfig(env)).toThrow(ConfigError);
  });

  test('local agents get the paths made absolute, so one started elsewhere reads the same files', () => {
    const relative = path.relative(process.cwd(), fixture('localhost-cert.pem'));
    expect(tracingEnvForChildren({ ...on, OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: relative })).toEqual({ ...on, OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: fixture('localhost-cert.pem') });
  });
});

describe('Tracing', () => {
  const start = () => {
    const exporter = new InMemorySpanExporter();
    const settings = read({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SERVICE_NAME: 'svc', OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test' })!;
    return { exporter, tracing: Tracing.start(settings, 'scope', { 'service.version': '1.2.3' }, new SimpleSpanProcessor({ exporter })) };
  };

  test('spans carry the resource; a child continues its parent\'s trace, a traceparent round-trips, a bad one is ignored', () => {
    const { exporter, tracing } = start();
    const parent = parentOf('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')!;
    const span = tracing.startSpan('work', SpanKind.INTERNAL, parent, { key: 'value' });
    span.end();
    const [exported] = exporter.getFinishedSpans();
    expect(exported.resource.attributes).toMatchObject({ 'service.name': 'svc', 'service.version': '1.2.3', 'deployment.environment': 'test' });
    expect(exported.spanContext().traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(exported.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(traceparentOf(span)).toBe(`00-0af7651916cd43dd8448eb211c80319c-${exported.spanContext().spanId}-01`);
    expect(parentOf(traceparentOf(span))).toEqual({ ...span.spanContext(), traceState: undefined, isRemote: true });
    for (const bad of ['', 'garbage', '00-00000000000000000000000000000000-b7ad6b7169203331-01', '00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01', null, undefined]) {
      expect(parentOf(bad)).toBeUndefined();
    }
  });

  test('log lines made under a span carry its trace_id and span_id; others carry neither', () => {
    const { tracing } = start();
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ mixin: tracing.logFields }, new Writable({ write: (chunk, _encoding, done) => done(null, lines.push(JSON.parse(chunk.toString()))) }));
    const span = tracing.startSpan('request', SpanKind.SERVER, undefined);
    logger.info('outside');
    tracing.runIn(span, (message: string) => logger.info({ requestId: 'req_1' }, message), 'inside');
    return new Promise<void>((resolve) => setImmediate(() => {
      expect(lines[0]).not.toHaveProperty('trace_id');
      expect(lines[1]).toMatchObject({ msg: 'inside', requestId: 'req_1', trace_id: span.spanContext().traceId, span_id: span.spanContext().spanId });
      resolve();
    }));
  });
});
