import { AsyncLocalStorage } from 'node:async_hooks';
import { ROOT_CONTEXT, SpanKind, trace, TraceFlags, type Attributes, type Link, type Span, type SpanContext, type TimeInput, type Tracer } from '@opentelemetry/api';
import { parseTraceParent } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider,
  type Sampler, type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import type { TracingSettings } from './otel-settings';
import { OtlpHttpSender } from './otlp-http-sender';
import { OtlpSpanProcessor } from './otlp-span-processor';

export { SpanKind, SpanStatusCode } from '@opentelemetry/api';
export type { Attributes, Span, SpanContext } from '@opentelemetry/api';

/** What a process's spans say about it beside OTEL_* (the server's or agent's version, the agent's id). */
export interface TracingResource {
  readonly 'service.version'?: string;
  readonly 'service.instance.id'?: string;
}

/**
 * One process's tracing, when it is on: a tracer that exports to the configured OTLP endpoint,
 * and the span a piece of work runs under (for log lines). Code that traces holds a
 * `Tracing | null` and does nothing at all when it is null: no span, no attribute object, no
 * header is made per request while tracing is off (docs/tracing.md). Parents are passed
 * explicitly (a span's context, or a `traceparent` read off the wire); no global context
 * manager or tracer provider is registered, so two servers in one test process trace apart.
 */
export class Tracing {
  private readonly active = new AsyncLocalStorage<Span>();

  private constructor(private readonly provider: TracerProvider, readonly tracer: Tracer, readonly serviceName: string) {}

  /**
   * Starts exporting in batches per `settings`: OTLP/HTTP protobuf by our own processor (each span
   * encoded as it ends, OtlpSpanProcessor), JSON by the SDK's batch processor and exporter, unless a
   * test gives its own `processor`. `name` is the instrumentation scope (the component that traces).
   */
  static start(settings: TracingSettings, name: string, resource: TracingResource = {}, processor?: SpanProcessor): Tracing {
    const provider = new TracerProvider({
      resource: resourceFromAttributes({ ...settings.resourceAttributes, ...definedOf(resource), 'service.name': settings.serviceName }),
      sampler: samplerOf(settings.sampler),
      spanProcessors: [processor ?? processorOf(settings)],
    });
    return new Tracing(provider, provider.getTracer(name), settings.serviceName);
  }

  /**
   * A span, the child of `parent` (a span's context here, or one a `traceparent` carried in), or
   * the root of a new trace when there is none. `startTime`: when it began, for a step measured
   * before its span could be made (Unix ms).
   */
  startSpan(name: string, kind: SpanKind, parent: SpanContext | undefined, attributes?: Attributes, startTime?: TimeInput, links?: Link[]): Span {
    const context = parent ? trace.setSpanContext(ROOT_CONTEXT, parent) : ROOT_CONTEXT;
    return this.tracer.startSpan(name, { kind, attributes, startTime, links }, context);
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
    await this.provider.forceFlush();
  }

  /** Exports what is left and stops; spans ended later are dropped. */
  async shutdown(): Promise<void> {
    await this.provider.shutdown();
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
    return new OtlpSpanProcessor(new OtlpHttpSender({ endpoint: settings.endpoint, headers: settings.headers, timeoutMs }), settings.batch);
  }
  return new BatchSpanProcessor({
    exporter: new JsonTraceExporter({ url: settings.endpoint, headers: { ...settings.headers }, timeoutMillis: settings.exportTimeoutMs }),
    scheduledDelayMillis: settings.batch.scheduleDelayMs, maxQueueSize: settings.batch.maxQueueSize,
    maxExportBatchSize: settings.batch.maxExportBatchSize, exportTimeoutMillis: settings.batch.exportTimeoutMs,
  });
}

function samplerOf(settings: TracingSettings['sampler']): Sampler {
  const root = settings.kind === 'always_on' ? new AlwaysOnSampler()
    : settings.kind === 'always_off' ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(settings.ratio);
  return settings.parentBased ? new ParentBasedSampler({ root }) : root;
}

function definedOf(resource: TracingResource): Record<string, string> {
  return Object.fromEntries(Object.entries(resource).filter(([, value]) => value !== undefined));
}
