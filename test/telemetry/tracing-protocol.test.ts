import { readTracingSettings } from '../../common/tracing/otel-settings';
import { SpanKind, SpanStatusCode, Tracing } from '../../common/tracing/tracing';
import { OtlpReceiver, SPAN_KIND } from '../support/otlp-receiver';

/**
 * OTEL_EXPORTER_OTLP_PROTOCOL (and …_TRACES_PROTOCOL) choose the body of each export: protobuf by
 * default, as the OpenTelemetry specification says, or JSON. A receiver in this test (the
 * boundary we do not own) decodes what arrived, each encoding by its own reader.
 */
describe('the OTLP protocol of the trace export', () => {
  let receiver: OtlpReceiver;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
  });

  afterAll(async () => {
    await receiver?.stop();
  });

  /** One server span with a child carrying every kind of attribute value, exported with `env`'s protocol. */
  async function exportWith(env: NodeJS.ProcessEnv, service: string) {
    const settings = readTracingSettings({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: service, ...env }, 'unused')!;
    const tracing = Tracing.start(settings, 'test', { 'service.version': '9.9.9' });
    try {
      const root = tracing.startSpan('POST chat.completions', SpanKind.SERVER, undefined, { 'http.route': 'chat.completions' });
      const child = tracing.startSpan('chat m', SpanKind.CLIENT, root.spanContext(), {
        'gen_ai.usage.input_tokens': 12, 'inference.cost.usd': '0.25', ratio: 0.5, cached: true, 'gen_ai.response.finish_reasons': ['stop'],
      });
      child.setStatus({ code: SpanStatusCode.ERROR, message: 'engine_error' });
      child.end();
      root.end();
      await tracing.flush();
      return { root: root.spanContext(), child: child.spanContext(), exports: receiver.exports.slice(), spans: receiver.spans.filter((span) => span.service === service) };
    } finally {
      await tracing.shutdown();
    }
  }

  it.each<[string, NodeJS.ProcessEnv, string]>([
    ['protobuf with no protocol variable', {}, 'application/x-protobuf'],
    ['protobuf asked for by name', { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }, 'application/x-protobuf'],
    ['JSON when the general variable says so', { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }, 'application/json'],
    ['JSON when the traces variable says so over the general one', { OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }, 'application/json'],
  ])('%s', async (label, env, contentType) => {
    const service = `svc-${label.replace(/\W+/g, '-')}`;
    const before = receiver.exports.length;
    const { root, child, exports, spans } = await exportWith(env, service);
    expect(exports.slice(before).map((sent) => [sent.path, sent.contentType])).toEqual([['/v1/traces', contentType]]);
    expect(spans).toHaveLength(2);
    const server = spans.find((span) => span.name === 'POST chat.completions')!;
    expect(server).toMatchObject({ traceId: root.traceId, spanId: root.spanId, parentSpanId: '', kind: SPAN_KIND.server, attributes: { 'http.route': 'chat.completions' } });
    const client = spans.find((span) => span.name === 'chat m')!;
    expect(client).toMatchObject({
      traceId: root.traceId, spanId: child.spanId, parentSpanId: root.spanId, kind: SPAN_KIND.client,
      attributes: { 'gen_ai.usage.input_tokens': 12, 'inference.cost.usd': '0.25', ratio: 0.5, cached: true, 'gen_ai.response.finish_reasons': ['stop'] },
      status: { code: 2, message: 'engine_error' },
    });
    expect(client.endMs).toBeGreaterThanOrEqual(client.startMs);
    expect(client.startMs).toBeGreaterThan(Date.UTC(2020, 0, 1));
  });
});
