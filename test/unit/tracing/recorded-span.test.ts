/**
 * Our spans against the SDK's: the same calls on a RecordedSpan (through Tracing) and on the
 * SDK's own span (through its TracerProvider) must leave the same readable span, whatever the
 * calls are (invalid values, limits, status rules, calls after the end), and sampling must decide
 * as the SDK's samplers do.
 */
import { ROOT_CONTEXT, SpanStatusCode, TraceFlags, trace, type Attributes, type Span, type SpanContext } from '@opentelemetry/api';
import {
  InMemorySpanExporter, ParentBasedSampler, AlwaysOnSampler, SimpleSpanProcessor, TraceIdRatioBasedSampler, TracerProvider, type ReadableSpan,
} from '@opentelemetry/sdk-trace';
import { readTracingSettings } from '../../../common/tracing/otel-settings';
import { RandomIds } from '../../../common/tracing/random-ids';
import { isSampled, SpanKind, Tracing } from '../../../common/tracing/tracing';

const PARENT: SpanContext = { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true };

function ours(env: NodeJS.ProcessEnv = { OTEL_TRACES_EXPORTER: 'otlp' }) {
  const exporter = new InMemorySpanExporter();
  return { exporter, tracing: Tracing.start(readTracingSettings(env, 'test')!, 'scope', {}, new SimpleSpanProcessor({ exporter })) };
}

function sdks() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ sampler: new ParentBasedSampler({ root: new AlwaysOnSampler() }), spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const tracer = provider.getTracer('scope');
  return { exporter, start: (name: string, attributes?: Attributes) => tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, trace.setSpanContext(ROOT_CONTEXT, PARENT)) };
}

/** Every call a caller might make, the odd ones included. */
function script(span: Span, array: string[]): void {
  span.setAttribute('a.string', 'value');
  span.setAttribute('a.number', 3);
  span.setAttribute('a.float', 2.5);
  span.setAttribute('a.bool', false);
  span.setAttribute('a.array', array);
  span.setAttribute('a.mixed', ['x', 1] as unknown as string[]);
  span.setAttribute('an.object', { nested: true } as unknown as string);
  span.setAttribute('undefined', undefined);
  span.setAttribute('', 'empty key');
  span.setAttributes({ 'many.one': 1, 'many.two': 'two' });
  span.addEvent('first token', { 'gen_ai.usage.output_tokens': 1, bad: { no: 1 } as unknown as string }, 1_764_451_200_000);
  span.addEvent('bare');
  span.addLink({ context: { ...PARENT, spanId: 'aaaaaaaaaaaaaaaa' }, attributes: { why: 'follows' } });
  span.setStatus({ code: SpanStatusCode.ERROR, message: 'first' });
  span.setStatus({ code: SpanStatusCode.UNSET });
  span.setStatus({ code: SpanStatusCode.OK, message: 'ignored on OK' });
  span.setStatus({ code: SpanStatusCode.ERROR, message: 'OK stays' });
  span.updateName('renamed');
  span.recordException(Object.assign(new Error('boom'), { stack: 'stack' }));
  array.push('mutated after');
  span.end();
  span.setAttribute('after.end', 1);
  span.end();
}

function comparable(span: ReadableSpan) {
  return {
    name: span.name, kind: span.kind, attributes: span.attributes, status: span.status,
    events: span.events.map(({ name, attributes, droppedAttributesCount }) => ({ name, attributes, droppedAttributesCount: droppedAttributesCount ?? 0 })),
    eventTimes: span.events.map((event) => event.time[0] > 1_700_000_000),
    links: span.links.map(({ context, attributes, droppedAttributesCount }) => ({ spanId: context.spanId, attributes, droppedAttributesCount: droppedAttributesCount ?? 0 })),
    parent: span.parentSpanContext?.spanId, traceId: span.spanContext().traceId, ended: span.ended,
    dropped: [span.droppedAttributesCount, span.droppedEventsCount, span.droppedLinksCount],
    lasted: span.duration[0] >= 0 && span.duration[1] >= 0, scope: span.instrumentationScope.name,
  };
}

describe('RecordedSpan', () => {
  it('records what the SDK\'s span records, call for call', async () => {
    const ourSide = ours();
    const sdkSide = sdks();
    const initial = { 'start.kept': 'yes', 'start.dropped': { no: 1 } as unknown as string };
    script(ourSide.tracing.startSpan('work', SpanKind.CLIENT, PARENT, { ...initial }), ['a', 'b']);
    script(sdkSide.start('work', { ...initial }), ['a', 'b']);
    await ourSide.tracing.flush();
    const [mine] = ourSide.exporter.getFinishedSpans();
    const [theirs] = sdkSide.exporter.getFinishedSpans();
    expect(ourSide.exporter.getFinishedSpans()).toHaveLength(1);
    expect(comparable(mine)).toEqual(comparable(theirs));
    expect(mine.attributes['a.array']).toEqual(['a', 'b']);
    // ERROR, then OK (which overrides it and then stays), then ERROR again: OK.
    expect(mine.status).toEqual({ code: SpanStatusCode.OK });
  });

  it('keeps 128 attributes, events and links, as the SDK\'s default limits do', async () => {
    const ourSide = ours();
    const sdkSide = sdks();
    const many = Object.fromEntries(Array.from({ length: 130 }, (_, index) => [`key.${index}`, index]));
    for (const span of [ourSide.tracing.startSpan('limits', SpanKind.CLIENT, PARENT, many), sdkSide.start('limits', many)]) {
      span.setAttribute('one.more', 1);
      for (let index = 0; index < 130; index++) span.addEvent(`event ${index}`);
      for (let index = 0; index < 130; index++) span.addLink({ context: PARENT });
      span.end();
    }
    const mine = comparable(ourSide.exporter.getFinishedSpans()[0]);
    expect(mine).toEqual(comparable(sdkSide.exporter.getFinishedSpans()[0]));
    expect(mine.dropped).toEqual([3, 2, 2]);
  });

  it('ends a span that would end before it started at its start', async () => {
    const { tracing, exporter } = ours();
    tracing.startSpan('backwards', SpanKind.INTERNAL, undefined, undefined, Date.now()).end(Date.now() - 60_000);
    const [span] = exporter.getFinishedSpans();
    expect(span.endTime).toEqual(span.startTime);
    expect(span.duration).toEqual([0, 0]);
  });

  it('samples as the SDK\'s samplers decide: parent-based follows the parent, a ratio decides on the trace id', () => {
    const parentBased = ours().tracing;
    const unsampled = parentBased.startSpan('child', SpanKind.INTERNAL, { ...PARENT, traceFlags: TraceFlags.NONE });
    expect(unsampled.isRecording()).toBe(false);
    expect(unsampled.spanContext()).toMatchObject({ traceId: PARENT.traceId, traceFlags: TraceFlags.NONE });
    expect(unsampled.spanContext().spanId).not.toBe(PARENT.spanId);
    expect(parentBased.startSpan('child', SpanKind.INTERNAL, PARENT).isRecording()).toBe(true);

    const ratio = ours({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }).tracing;
    const sdkRatio = new TraceIdRatioBasedSampler(0.5);
    const ids = new RandomIds();
    let kept = 0;
    for (let index = 0; index < 400; index++) {
      const parent = { ...PARENT, traceId: ids.traceId() };
      const sampled = isSampled(ratio.startSpan('root', SpanKind.SERVER, parent).spanContext());
      expect(sampled).toBe(sdkRatio.shouldSample(ROOT_CONTEXT, parent.traceId).decision === 2);
      if (sampled) kept++;
    }
    expect(kept).toBeGreaterThan(140);
    expect(kept).toBeLessThan(260);
  });
});

describe('RandomIds', () => {
  it('gives distinct lowercase hex ids of 16 and 8 bytes, across pools', () => {
    const ids = new RandomIds();
    const spans = Array.from({ length: 2_000 }, () => ids.spanId());
    const traces = Array.from({ length: 300 }, () => ids.traceId());
    expect(spans.every((id) => /^[0-9a-f]{16}$/.test(id) && id !== '0'.repeat(16))).toBe(true);
    expect(traces.every((id) => /^[0-9a-f]{32}$/.test(id))).toBe(true);
    expect(new Set(spans).size).toBe(spans.length);
    expect(new Set(traces).size).toBe(traces.length);
  });
});
