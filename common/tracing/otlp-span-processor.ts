import { TraceFlags } from '@opentelemetry/api';
import type { InstrumentationScope } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace';
import { encodeExportRequest, writeSpanEntry, type ScopeRun } from './otlp-span-encoder';
import { ProtobufWriter } from './protobuf-writer';

/** The batch settings (`OTEL_BSP_*`, TracingSettings.batch). */
export interface OtlpBatchOptions {
  /** How long a span may wait for its batch to fill before it is sent anyway. */
  readonly scheduleDelayMs: number;
  /** Spans waiting beyond this are dropped (counted in `droppedSpans`). */
  readonly maxQueueSize: number;
  /** Spans per request at most; a full batch is sent at once. */
  readonly maxExportBatchSize: number;
}

/** Where a batch's request body goes: resolves whether it was taken, never rejects (OtlpHttpSender). */
export interface SpanBodySender {
  send(body: Buffer): Promise<boolean>;
  close(): void;
}

const INITIAL_QUEUE_BYTES = 64 * 1024;
/**
 * Ended spans are encoded this many at a time: in a server, encoding each span as it ends runs
 * the encoder cold between requests (its profile cost three times the in-process figure);
 * 32 together keep it warm, and 32 spans still die young.
 */
const ENCODE_BATCH = 32;
/** A queue that grew past this (a burst, or a stalled receiver) is given back once it empties. */
const KEPT_QUEUE_BYTES = 1024 * 1024;

/**
 * The batch span processor of our OTLP/HTTP protobuf export. It does what the SDK's
 * BatchSpanProcessor and protobuf exporter do together, for about a third of their CPU
 * (bench/results/2026-11-29-issue37-tracing-export.md): sampled spans are encoded to their OTLP
 * bytes soon after they end (ENCODE_BATCH at a time), into one growing buffer, and the span
 * objects are not kept. The SDK's
 * serializer sizes every batch in a pass of its own and allocates an array per id, and its
 * processor keeps every ended span until its batch of 512 is serialized (some reach the old
 * generation).
 *
 * A batch is sent when it is full or `scheduleDelayMs` after its first span, one request at a time
 * (OtlpHttpSender); spans that end while the queue holds `maxQueueSize` are dropped and counted, so
 * a receiver that fails or never answers costs a bounded queue and no more. Nothing here throws
 * into the code that ends a span.
 */
export class OtlpSpanProcessor implements SpanProcessor {
  /** Spans dropped: the queue was full, or (never expected) a span could not be encoded. */
  droppedSpans = 0;
  /** Spans in requests the receiver took, and in requests that failed or timed out (dropped). */
  exportedSpans = 0;
  failedSpans = 0;

  private readonly queue = new ProtobufWriter(INITIAL_QUEUE_BYTES);
  /** Per queued span: where its entry ends in `queue`, and its instrumentation scope. */
  private readonly entryEnds: number[] = [];
  private readonly scopes: InstrumentationScope[] = [];
  /** Spans ended and not yet encoded (at most ENCODE_BATCH). */
  private readonly ended: ReadableSpan[] = [];
  private resource: Resource | undefined;
  /** Spans taken from the queue into requests so far (a flush waits until it has passed its mark). */
  private taken = 0;
  private flushMark = 0;
  private timerDue = false;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopping: Promise<void> | null = null;

  constructor(private readonly sender: SpanBodySender, private readonly options: OtlpBatchOptions) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.stopping || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.entryEnds.length + this.ended.length >= this.options.maxQueueSize) {
      this.droppedSpans++;
      return;
    }
    this.ended.push(span);
    if (this.ended.length >= ENCODE_BATCH) this.encodeEnded();
    if (this.entryEnds.length + this.ended.length >= this.options.maxExportBatchSize) void this.pump();
    else this.schedule();
  }

  /** Sends every span queued now and waits until it is sent (or failed). */
  async forceFlush(): Promise<void> {
    this.encodeEnded();
    this.flushMark = Math.max(this.flushMark, this.taken + this.entryEnds.length);
    while (this.running || (this.taken < this.flushMark && this.entryEnds.length > 0)) await this.pump();
  }

  /** Encodes the spans that ended since the last time into the queue (and lets them go). */
  private encodeEnded(): void {
    for (const span of this.ended) {
      const start = this.queue.length;
      try {
        writeSpanEntry(this.queue, span);
      } catch {
        this.queue.truncate(start);
        this.droppedSpans++;
        continue;
      }
      this.entryEnds.push(this.queue.length);
      this.scopes.push(span.instrumentationScope);
      this.resource ??= span.resource;
    }
    this.ended.length = 0;
  }

  /** Sends what is queued, then closes the connection; spans ending later are dropped. */
  shutdown(): Promise<void> {
    this.stopping ??= (async () => {
      clearTimeout(this.timer);
      this.timer = undefined;
      await this.forceFlush();
      this.sender.close();
    })();
    return this.stopping;
  }

  private schedule(): void {
    if (this.timer || this.running || this.entryEnds.length + this.ended.length === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerDue = true;
      void this.pump();
    }, this.options.scheduleDelayMs);
    // A process that has nothing else to do exits; shutdown sends what is left.
    this.timer.unref();
  }

  /** Runs the one sending loop, or returns the one running. */
  private pump(): Promise<void> {
    this.running ??= this.sendWhileDue().finally(() => {
      this.running = null;
      if (!this.stopping) this.schedule();
    });
    return this.running;
  }

  private async sendWhileDue(): Promise<void> {
    this.encodeEnded();
    while (this.entryEnds.length > 0 && (this.timerDue || this.taken < this.flushMark || this.entryEnds.length >= this.options.maxExportBatchSize)) {
      this.timerDue = false;
      const count = Math.min(this.entryEnds.length, this.options.maxExportBatchSize);
      const body = this.takeBatch(count);
      const taken = body ? await this.sender.send(body) : false;
      if (taken) this.exportedSpans += count;
      else this.failedSpans += count;
      this.encodeEnded();
    }
  }

  /** The request body of the first `count` queued spans, which leave the queue. */
  private takeBatch(count: number): Buffer | null {
    const bytes = this.entryEnds[count - 1];
    const runs: ScopeRun[] = [];
    let runStart = 0;
    for (let index = 1; index <= count; index++) {
      if (index < count && this.scopes[index] === this.scopes[runStart]) continue;
      const from = runStart === 0 ? 0 : this.entryEnds[runStart - 1];
      runs.push({ scope: this.scopes[runStart], entries: this.queue.view(from, this.entryEnds[index - 1]) });
      runStart = index;
    }
    let body: Buffer | null = null;
    try {
      body = encodeExportRequest(this.resource!, runs);
    } catch {
      // Never expected (the spans are already encoded); the batch is dropped like a failed export.
    }
    this.queue.compact(bytes);
    this.entryEnds.splice(0, count);
    for (let index = 0; index < this.entryEnds.length; index++) this.entryEnds[index] -= bytes;
    this.scopes.splice(0, count);
    this.taken += count;
    if (this.entryEnds.length === 0 && this.queue.capacity > KEPT_QUEUE_BYTES) this.queue.reset(INITIAL_QUEUE_BYTES);
    return body;
  }
}
