import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Attributes, type Link, type Span, type SpanContext, type TimeInput } from '@opentelemetry/api';
import { parseTraceParent, type InstrumentationScope } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, SamplingDecision, TraceIdRatioBasedSampler,
  type Sampler, type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import type { TracingSettings } from './otel-settings';
import { OtlpHttpSender } from './otlp-http-sender';
import { sdkAgentOptions } from './otlp-tls';
import { OtlpSpanProcessor } from './otlp-span-processor';
import { RandomIds } from './random-ids';
import { nowHrTime, RecordedSpan, toHrTime, type SpanOwner } from './recorded-span';

export { SpanKind, SpanStatusCode } from '@opentelemetry/api';

/** What a root sampler is shown for a span without attributes or links (none of ours reads them; no object per span). */
const NO_ATTRIBUTES: Attributes = Object.freeze({});
const NO_LINKS = Object.freeze([]) as unknown as Link[];
export type { Attributes, Span, SpanContext } from '@opentelemetry/api';

/** What a process's spans say about it beside OTEL_* (the server's or agent's version, the agent's id). */
export interface TracingResource {
  readonly 'service.version'?: string;
  readonly 'service.instance.id'?: string;
}

/**
 * One process's tracing, when it is on: spans exported to the configured OTLP endpoint, and the
 * span a piece of work runs under (for log lines). Code that traces holds a `Tracing | null`
 * and does nothing at all when it is null: no span, no attribute object, no header is made per
 * request while tracing is off (docs/tracing.md). Parents are passed explicitly (a span's
 * context, or a `traceparent` read off the wire); no global context manager or tracer provider
 * is registered, so two servers in one test process trace apart.
 *
 * Spans are made here rather than by the SDK's tracer: a sampled one is a RecordedSpan (the
 * SDK's span semantics and its `ReadableSpan` shape, so its processors and exporters take it, at
 * about a third of the CPU: no context object, no attribute copy, no diagnostics), an unsampled
 * one the API's NonRecordingSpan. The samplers are the SDK's own; ids come from RandomIds.
 */
export class Tracing implements SpanOwner {
  private readonly active = new AsyncLocalStorage<Span>();
  private readonly ids = new RandomIds();

  private constructor(
    private readonly processor: SpanProcessor,
    private readonly sampler: { readonly root: Sampler; readonly parentBased: boolean },
    readonly resource: Resource,
    readonly instrumentationScope: InstrumentationScope,
    readonly serviceName: string,
  ) {}

  /**
   * Starts exporting in batches per `settings`: OTLP/HTTP protobuf by our own processor (each span
   * encoded as it ends, OtlpSpanProcessor), JSON by the SDK's batch processor and exporter, unless a
   * test gives its own `processor`. `name` is the instrumentation scope (the component that traces).
   */
  static start(settings: TracingSettings, name: string, resource: TracingResource = {}, processor?: SpanProcessor): Tracing {
    return new Tracing(
      processor ?? processorOf(settings), samplerOf(settings.sampler),
      resourceFromAttributes({ ...settings.resourceAttributes, ...definedOf(resource), 'service.name': settings.serviceName }),
      { name }, settings.serviceName,
    );
  }

  /**
   * A span, the child of `parent` (a span's context here, or one a `traceparent` carried in), or
   * the root of a new trace when there is none. `startTime`: when it began, for a step measured
   * before its span could be made (Unix ms). Sampled as the settings say: a child of a parent as
   * its parent was when the sampler is parent-based, otherwise by the root sampler.
   */
  startSpan(name: string, kind: SpanKind, parent: SpanContext | undefined, attributes?: Attributes, startTime?: TimeInput, links?: Link[]): Span {
    // Parents are our own spans' contexts or ones parentOf validated off the wire: the ids' lengths
    // stand in for the API's regular expressions, which cost a twentieth of tracing in a profile.
    const valid = parent !== undefined && parent.traceId.length === 32 && parent.spanId.length === 16;
    const traceId = valid ? parent.traceId : this.ids.traceId();
    const spanId = this.ids.spanId();
    const sampled = valid && this.sampler.parentBased
      ? (parent.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED
      : this.sampler.root.shouldSample(ROOT_CONTEXT, traceId, name, kind, attributes ?? NO_ATTRIBUTES, links ?? NO_LINKS).decision === SamplingDecision.RECORD_AND_SAMPLED;
    const context: SpanContext = { traceId, spanId, traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, traceState: valid ? parent.traceState : undefined };
    if (!sampled) return trace.wrapSpanContext(context);
    const span = new RecordedSpan(context, name, kind, valid ? parent : undefined, startTime === undefined ? nowHrTime() : toHrTime(startTime), attributes, links, this);
    this.processor.onStart(span, ROOT_CONTEXT);
    return span;
  }

  /** SpanOwner: a span ended (its processor exports it). */
  ended(span: RecordedSpan): void {
    this.processor.onEnd(span);
  }

  /** Runs `work(...args)` with `span` as the span its log lines name (`trace_id`, `span_id`); the arguments spare callers a closure. */
  runIn<A extends unknown[], T>(span: Span, work: (...args: A) => T, ...args: A): T {
    return this.active.run(span, work, ...args);
  }

  /** The pino mixin: the ids of the span the current work runs under, or no fields (a new object each time: pino merges the line's fields into it). */
  readonly logFields = (): object => {
    const span = this.active.getStore();
    if (!span) return {};
    const context = span.spanContext();
    return { trace_id: context.traceId, span_id: context.spanId };
  };

  /** Exports what is buffered now (tests; a process about to exit). */
  async flush(): Promise<void> {
    await this.processor.forceFlush();
  }

  /** Exports what is left and stops; spans ended later are dropped. */
  async shutdown(): Promise<void> {
    await this.processor.shutdown();
  }
}

/**
 * Whether a trace context's sampled flag is set. Every sampler this build offers decides a
 * child as its trace's root was decided (parent-based, or by the trace id's ratio), so the
 * children of an unsampled span would all be unsampled too: callers make none and only pass
 * the context on.
 */
export function isSampled(context: SpanContext): boolean {
  return (context.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
}

/** The W3C `traceparent` of a span (version 00). */
export function traceparentOf(span: Span | SpanContext): string {
  const context = 'spanContext' in span ? span.spanContext() : span;
  return `00-${context.traceId}-${context.spanId}-${context.traceFlags & 1 ? '01' : '00'}`;
}

/** The remote parent a `traceparent` names; undefined for none, or for one that is not valid (it is ignored, as W3C says). */
export function parentOf(traceparent: string | undefined | null): SpanContext | undefined {
  if (!traceparent) return undefined;
  const parsed = parseTraceParent(traceparent);
  if (!parsed || !trace.isSpanContextValid(parsed)) return undefined;
  return { ...parsed, isRemote: true };
}

/** The export `settings` ask for (their protocol's). */
function processorOf(settings: TracingSettings): SpanProcessor {
  // One request's timeout is the shorter of the exporter's and the batch processor's (there is no retry to share the latter with).
  const timeoutMs = Math.min(settings.exportTimeoutMs, settings.batch.exportTimeoutMs);
  if (settings.protocol === 'http/protobuf') {
    return new OtlpSpanProcessor(new OtlpHttpSender({ endpoint: settings.endpoint, headers: settings.headers, timeoutMs, tls: settings.tls }), settings.batch);
  }
  return new BatchSpanProcessor({
    exporter: new JsonTraceExporter({
      url: settings.endpoint, headers: { ...settings.headers }, timeoutMillis: settings.exportTimeoutMs,
      ...sdkAgentOptions(settings.tls),
    }),
    scheduledDelayMillis: settings.batch.scheduleDelayMs, maxQueueSize: settings.batch.maxQueueSize,
    maxExportBatchSize: settings.batch.maxExportBatchSize, exportTimeoutMillis: settings.batch.exportTimeoutMs,
  });
}

/** The root sampler the settings name, and whether a child follows its parent's decision instead (the `parentbased_` samplers). */
function samplerOf(settings: TracingSettings['sampler']): { root: Sampler; parentBased: boolean } {
  const root = settings.kind === 'always_on' ? new AlwaysOnSampler()
    : settings.kind === 'always_off' ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(settings.ratio);
  return { root, parentBased: settings.parentBased };
}

function definedOf(resource: TracingResource): Record<string, string> {
  return Object.fromEntries(Object.entries(resource).filter(([, value]) => value !== undefined));
}
