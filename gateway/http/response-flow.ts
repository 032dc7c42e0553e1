import type { ServerResponse } from 'node:http';
import type { AppError } from '../../control-plane/api/errors';

/** A blocked response's flushing is looked at this often per timeout: a stall is seen at most a tenth of one late. */
const CHECKS_PER_TIMEOUT = 10;

export interface ResponseFlowOptions {
  /** A response whose buffered bytes stop leaving for this long is stalled. */
  stallTimeoutMs: number;
  /** More than this many bytes waiting for the client at once is stalled too (the producer ignored its window). */
  maxBufferedBytes: number;
  /**
   * Where bytes waiting for the client are held in the tenant budget (request-budget.ts); a
   * refusal stalls the response as if the client had stopped reading (its job is let go).
   */
  memory?: { waiting(totalBytes: number): AppError | null };
}

export interface ResponseFlowEvents {
  /** Bytes the client's socket took: the job may produce that many more. */
  consumed(bytes: number): void;
  /** The client stopped reading; nothing more may be written. */
  stalled(why: string): void;
}

/**
 * Writes a response as its client reads it. Bytes `write()` took below the socket's
 * high-water mark count as consumed at once; bytes written past it only once the response
 * drains, so a job's producer (its agent, through its stream window) runs at most a window
 * ahead of the client. While bytes wait, their flushing is watched: none leaving for
 * `stallTimeoutMs` means the client stopped reading (it holds the socket open and reads
 * nothing), which `stalled` reports so the caller frees the job and the socket.
 * The same watch covers a body whose end() could not be flushed at once.
 */
export class ResponseFlow {
  /** Bytes written since the response went over its high-water mark; reported once it drains. */
  private waitingBytes = 0;
  private waitingForDrain = false;
  /** Payload bytes handed to the response; minus `writableLength`, what has left for the socket. */
  private writtenBytes = 0;
  private flushedAtLastCheck = 0;
  /** performance.now() when bytes last left for the client (or the watch began). */
  private progressAt = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private ended = false;
  private stalledAlready = false;
  /** Made when a response first blocks (most never do). */
  private drainListener: (() => void) | undefined;

  constructor(
    private readonly response: ServerResponse,
    private readonly options: ResponseFlowOptions,
    private readonly events: ResponseFlowEvents,
  ) {}

  write(data: Buffer): void {
    this.writtenBytes += data.length;
    const accepted = this.response.write(data);
    if (accepted && !this.waitingForDrain) {
      this.events.consumed(data.length);
      return;
    }
    this.waitingBytes += data.length;
    if (!this.waitingForDrain) {
      this.waitingForDrain = true;
      this.response.once('drain', this.drainListener ??= () => this.onDrain());
      this.watch();
    }
    if (this.waitingBytes > this.options.maxBufferedBytes) this.stall(`more than ${this.options.maxBufferedBytes} bytes waited for the client`);
    const refusal = this.options.memory?.waiting(this.waitingBytes);
    if (refusal) this.stall(refusal.message);
  }

  /** Ends the response; an end that could not be flushed at once stays watched until it is. */
  end(data?: Buffer | string): void {
    this.ended = true;
    if (data !== undefined) this.writtenBytes += Buffer.byteLength(data);
    this.response.end(data);
    if (this.response.writableLength > 0) this.watch();
  }

  /*
   * onDrain and check are methods, not arrow-function fields: V8 allocates a closure assigned
   * to a field in old space, and with it the request's whole object graph survived every minor
   * GC until a full one (5.9 KB promoted per request; gateway CPU 136 → 162 µs per JSON request,
   * docs/performance.md#garbage-collection-on-the-hot-path). Closures are made only when needed.
   */
  private onDrain(): void {
    this.waitingForDrain = false;
    const bytes = this.waitingBytes;
    this.waitingBytes = 0;
    this.options.memory?.waiting(0);
    if (!this.ended) this.clearWatch();
    this.events.consumed(bytes);
  }

  private watch(): void {
    if (this.stallTimer) return;
    this.flushedAtLastCheck = this.flushed();
    this.progressAt = performance.now();
    this.arm();
  }

  private arm(): void {
    this.stallTimer = setTimeout(() => this.check(), this.options.stallTimeoutMs / CHECKS_PER_TIMEOUT);
    // Only frees what a connection holds: never a reason for the process to stay up.
    this.stallTimer.unref();
  }

  private clearWatch(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
  }

  /** Bytes that left since the last check: the client reads, however slowly. None for the whole timeout: it stalled. */
  private check(): void {
    this.stallTimer = undefined;
    if (this.response.destroyed || (this.response.writableLength === 0 && !this.waitingForDrain)) return;
    const flushed = this.flushed();
    const now = performance.now();
    if (flushed > this.flushedAtLastCheck || this.response.writableLength === 0) {
      this.flushedAtLastCheck = flushed;
      this.progressAt = now;
    }
    if (now - this.progressAt < this.options.stallTimeoutMs) {
      this.arm();
      return;
    }
    this.stall(`no byte reached the client for ${this.options.stallTimeoutMs} ms`);
  }

  private stall(why: string): void {
    if (this.stalledAlready) return;
    this.stalledAlready = true;
    this.clearWatch();
    if (this.drainListener) this.response.off('drain', this.drainListener);
    this.events.stalled(why);
  }

  private flushed(): number {
    return this.writtenBytes - this.response.writableLength;
  }
}
