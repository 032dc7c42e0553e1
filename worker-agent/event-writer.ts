/**
 * Writes job events to the agent's stream. Events produced in the same event-loop turn go out
 * as one `JobEventBatch` in order (gRPC-js moves only a few thousand small messages a second,
 * see docs/performance.md#coalesce-grpc-frames). When the stream's buffer is full, `send` hands back a promise that
 * resolves on 'drain'; engines await it before reading more, so memory stays bounded.
 * That wait holds every job of the stream, so it is only the last resort against a control
 * plane that reads slowly as a whole: a slow client holds only its own job, by its stream
 * window (stream-window.ts), long before the shared stream fills.
 */
import type { AgentFrame, JobEvent } from '../proto/worker/v1/index';

/** The writable half of the stream (a gRPC `ClientDuplexStream` satisfies it). */
export interface FrameStream {
  write(frame: AgentFrame): boolean;
  once(event: 'drain', listener: () => void): unknown;
}

// Keeps each frame well below gRPC's default 4 MiB receive limit on the control plane.
const MAX_BATCH_BYTES = 1024 * 1024;
const EVENT_OVERHEAD_BYTES = 32;
const MAX_MERGED_CHUNK_BYTES = 64 * 1024;

export class EventWriter {
  private pending: JobEvent[] = [];
  /** Chunk bytes merged into the last pending event, joined once at flush (not once per send). */
  private mergedParts: Buffer[] | null = null;
  private mergedBytes = 0;
  private flushScheduled = false;
  private blocked: Promise<void> | undefined;
  private unblock: (() => void) | undefined;
  private closed = false;

  constructor(private readonly stream: FrameStream) {}

  /** Queues `event` for this turn's batch; returns a promise while the stream is saturated. */
  send(event: JobEvent): Promise<void> | undefined {
    if (this.closed) return undefined;
    // Consecutive chunks of one job in the same batch travel as one event: one protobuf object
    // here and one client write at the gateway instead of one per engine read.
    const last = this.pending[this.pending.length - 1];
    if (event.chunk && last?.chunk && last.jobId === event.jobId && this.mergedBytes < MAX_MERGED_CHUNK_BYTES) {
      this.mergedParts ??= [last.chunk.data];
      this.mergedParts.push(event.chunk.data);
      this.mergedBytes += event.chunk.data.length;
      return this.blocked;
    }
    this.joinMerged();
    this.pending.push(event);
    this.mergedBytes = event.chunk?.data.length ?? 0;
    if (!this.flushScheduled && !this.blocked) {
      this.flushScheduled = true;
      setImmediate(this.flush);
    }
    return this.blocked;
  }

  /** Writes a non-job frame (Hello, Heartbeat) at once; they are tiny and never coalesced. */
  writeFrame(frame: AgentFrame): void {
    if (!this.closed) this.stream.write(frame);
  }

  /** Resolves once every queued event has been handed to the stream (or the stream closed). */
  async flushed(): Promise<void> {
    while (!this.closed && (this.pending.length > 0 || this.blocked || this.flushScheduled)) {
      await (this.blocked ?? new Promise((resolve) => setImmediate(resolve)));
    }
  }

  /** The stream is gone: drop what is queued and release engines waiting for 'drain'. */
  close(): void {
    this.closed = true;
    this.pending = [];
    this.mergedParts = null;
    this.release();
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (this.closed || this.blocked || this.pending.length === 0) return;
    this.joinMerged();
    const events = this.pending;
    this.pending = [];
    let start = 0;
    let bytes = 0;
    for (let index = 0; index < events.length; index += 1) {
      bytes += sizeOf(events[index]);
      if (bytes >= MAX_BATCH_BYTES || index === events.length - 1) {
        const writable = this.stream.write(frameOf(events.slice(start, index + 1)));
        start = index + 1;
        bytes = 0;
        if (!writable) {
          // The rest waits here, in order, rather than in the stream's buffer: a saturated stream
          // gets at most one batch past its high-water mark, whatever the engines made this turn.
          this.pending = events.slice(start);
          this.waitForDrain();
          return;
        }
      }
    }
  };

  private joinMerged(): void {
    if (!this.mergedParts) return;
    const last = this.pending[this.pending.length - 1];
    last.chunk = { data: Buffer.concat(this.mergedParts) };
    this.mergedParts = null;
  }

  private waitForDrain(): void {
    this.blocked = new Promise((resolve) => { this.unblock = resolve; });
    this.stream.once('drain', () => {
      this.release();
      this.flush();
    });
  }

  private release(): void {
    const unblock = this.unblock;
    this.blocked = undefined;
    this.unblock = undefined;
    unblock?.();
  }
}

function frameOf(events: JobEvent[]): AgentFrame {
  return events.length === 1 ? { jobEvent: events[0] } : { jobEvents: { events } };
}

function sizeOf(event: JobEvent): number {
  return EVENT_OVERHEAD_BYTES + (event.chunk?.data.length ?? event.output?.data.length ?? 0);
}
