/**
 * Our OTLP span encoder against the SDK's own protobuf serializer: for the same ended spans, the
 * request we assemble from spans encoded one by one decodes (otlp-message.ts, by the proto's
 * field numbers) to the same message as `ProtobufTraceSerializer`'s.
 */
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, TraceFlags, type Tracer } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { TracerProvider, type ReadableSpan, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { encodeExportRequest, writeSpanEntry } from '../../../common/tracing/otlp-span-encoder';
import { ProtobufWriter } from '../../../common/tracing/protobuf-writer';
import { decodeMessage } from './otlp-message';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const REMOTE_PARENT = { traceId: TRACE_ID, spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('vendor=abc,other=1') };
const LINKED = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7', traceFlags: TraceFlags.NONE, traceState: new TraceState('linked=yes') };

function providerCollecting(spans: ReadableSpan[]): TracerProvider {
  const collector: SpanProcessor = { onStart() {}, onEnd: (span) => spans.push(span), forceFlush: async () => {}, shutdown: async () => {} };
  return new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'gateway', 'service.version': '1.2.3', 'deployment.environment': 'test' }),
    spanLimits: { attributeCountLimit: 24, eventCountLimit: 3, linkCountLimit: 2 },
    spanProcessors: [collector],
  });
}

/** Our request for `spans`: each encoded alone, in one buffer, then wrapped in one ScopeSpans per scope in order. */
function ours(spans: ReadableSpan[]): Buffer {
  const writer = new ProtobufWriter(64);
  const runs: Array<{ scope: ReadableSpan['instrumentationScope']; start: number; end: number }> = [];
  for (const span of spans) {
    const start = writer.length;
    writeSpanEntry(writer, span);
    const last = runs[runs.length - 1];
    if (last && last.scope === span.instrumentationScope) last.end = writer.length;
    else runs.push({ scope: span.instrumentationScope, start, end: writer.length });
  }
  return encodeExportRequest(spans[0].resource, runs.map((run) => ({ scope: run.scope, entries: writer.view(run.start, run.end) })));
}

const official = (spans: ReadableSpan[]) => ProtobufTraceSerializer.serializeRequest(spans)!;

/** The spans of a chat request and then some: every attribute kind, events, links, statuses, a remote parent with trace state, unicode. */
function realisticSpans(tracer: Tracer): void {
  const server = tracer.startSpan('POST /v1/chat/completions', {
    kind: SpanKind.SERVER,
    attributes: {
      'http.request.method': 'POST', 'http.route': 'chat.completions', 'http.response.status_code': 200, 'inference.stream': true,
      'gen_ai.usage.input_tokens': 12, 'inference.cost.usd': '0.000250', ratio: 0.25, negative: -42, 'big.int': 2 ** 60, 'unsafe.int': 2 ** 53 + 2,
      huge: 1e300, 'not.a.number': Number.NaN, infinite: Number.POSITIVE_INFINITY, 'min.int': -(2 ** 63), 'past.int64': 2 ** 63,
      'gen_ai.response.finish_reasons': ['stop', 'length'], counts: [1, 2.5, -3], flags: [true, false], holes: ['a', null, 'c'] as string[], empty: '',
      'unicode.text': 'modèle « chat » 模型 🚀',
    },
  }, trace.setSpanContext(ROOT_CONTEXT, REMOTE_PARENT));
  server.addEvent('first token', { 'gen_ai.usage.output_tokens': 1 }, [1_764_451_200, 5]);
  server.addEvent('no attributes');
  const admit = tracer.startSpan('admit', { kind: SpanKind.INTERNAL }, trace.setSpan(ROOT_CONTEXT, server));
  admit.setStatus({ code: SpanStatusCode.OK });
  admit.end();
  const chat = tracer.startSpan('chat acme/模型-8b', {
    kind: SpanKind.CLIENT,
    links: [{ context: LINKED, attributes: { 'inference.batch.id': 'batch_1' } }, { context: { ...REMOTE_PARENT, traceState: undefined } }],
    startTime: [1_764_451_200, 123_456_789],
  }, trace.setSpan(ROOT_CONTEXT, server));
  chat.setStatus({ code: SpanStatusCode.ERROR, message: 'engine_error: the engine « stopped »' });
  chat.end([1_764_451_201, 999_999_999]);
  const producer = tracer.startSpan('enqueue', { kind: SpanKind.PRODUCER, root: true });
  for (let index = 0; index < 30; index++) producer.setAttribute(`attribute.${index}`, index);
  for (let index = 0; index < 5; index++) producer.addEvent(`event ${index}`);
  producer.end();
  tracer.startSpan('consume', { kind: SpanKind.CONSUMER, links: [{ context: LINKED }, { context: LINKED }, { context: LINKED }] }).end();
  server.end();
}

describe('the OTLP span encoder', () => {
  test('decodes to the same request as the SDK serializer for realistic spans', () => {
    const spans: ReadableSpan[] = [];
    realisticSpans(providerCollecting(spans).getTracer('gateway', '9.9.9'));
    expect(spans).toHaveLength(5);
    // The limits did drop something, so the dropped counts are compared with values.
    expect(spans.some((span) => span.droppedAttributesCount > 0 && span.droppedEventsCount > 0)).toBe(true);
    expect(spans.some((span) => span.droppedLinksCount > 0)).toBe(true);
    expect(decodeMessage(ours(spans))).toEqual(decodeMessage(official(spans)));
  });

  test('writes the values OTLP expects: kinds from 1, ids as bytes, exact nanoseconds, int64 as int and the rest as double, span flags', () => {
    const spans: ReadableSpan[] = [];
    realisticSpans(providerCollecting(spans).getTracer('gateway'));
    const request = decodeMessage(ours(spans)) as any;
    const decoded = request.resourceSpans[0].scopeSpans[0].spans;
    const chat = decoded.find((span: any) => span.name === 'chat acme/模型-8b');
    expect(chat).toMatchObject({ kind: '3', traceId: TRACE_ID, startTimeUnixNano: '1764451200123456789', endTimeUnixNano: '1764451201999999999' });
    expect(chat.status).toEqual({ code: '2', message: 'engine_error: the engine « stopped »' });
    expect(chat.links[0]).toMatchObject({ traceId: LINKED.traceId, spanId: LINKED.spanId, traceState: 'linked=yes', flags: String(0x100) });
    const server = decoded.find((span: any) => span.kind === '2');
    // Sampled, its parent's remoteness known (0x100) and remote (0x200).
    expect(server).toMatchObject({ parentSpanId: REMOTE_PARENT.spanId, traceState: 'vendor=abc,other=1', flags: String(0x301) });
    const value = (key: string) => server.attributes.find((attribute: any) => attribute.key === key).value;
    expect(value('negative')).toEqual({ intValue: '-42' });
    expect(value('unsafe.int')).toEqual({ intValue: String(2n ** 53n + 2n) });
    expect(value('min.int')).toEqual({ intValue: String(-(2n ** 63n)) });
    expect(value('past.int64')).toEqual({ doubleValue: 2 ** 63 });
    expect(value('ratio')).toEqual({ doubleValue: 0.25 });
    expect(value('not.a.number').doubleValue).toBeNaN();
    expect(value('holes')).toEqual({ arrayValue: { values: [{ stringValue: 'a' }, {}, { stringValue: 'c' }] } });
    expect(value('unicode.text')).toEqual({ stringValue: 'modèle « chat » 模型 🚀' });
  });

  test('a span larger than 16 KiB (a three-byte length) and spans of two scopes in turn', () => {
    const spans: ReadableSpan[] = [];
    const provider = providerCollecting(spans);
    provider.getTracer('gateway').startSpan('big', { attributes: { prompt: 'é'.repeat(10_000), ascii: 'x'.repeat(127), short: 'y'.repeat(128) } }).end();
    provider.getTracer('gateway').startSpan('after big').end();
    provider.getTracer('agent', '2.0.0').startSpan('agent job').end();
    expect(decodeMessage(ours(spans))).toEqual(decodeMessage(official(spans)));
  });

  test('string attributes met again are copied from the cache of encoded pairs, and values past its bounds are still written', () => {
    const spans: ReadableSpan[] = [];
    const tracer = providerCollecting(spans).getTracer('gateway');
    // The same model and route on every span (cached after the first), a new request id on each
    // (its key's share of the cache fills, then each is written as it comes), and values too long to cache.
    for (let index = 0; index < 150; index++) {
      tracer.startSpan(`request ${index}`, {
        attributes: { 'gen_ai.request.model': 'org/chat-8b', 'http.route': '/v1/chat/completions', 'inference.request.id': `req_${index}`, long: `${'z'.repeat(300)}${index % 2}` },
      }).end();
    }
    expect(decodeMessage(ours(spans))).toEqual(decodeMessage(official(spans)));
    expect(decodeMessage(ours(spans.slice(140)))).toEqual(decodeMessage(official(spans.slice(140))));
  });
});
