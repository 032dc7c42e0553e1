import type http from 'node:http';
import type net from 'node:net';
import type { Logger } from 'pino';
import type { BudgetLease } from '../../control-plane/api/inference';

/** What connection-budget.ts keeps per connection; the sweep reads and updates its progress fields. */
export interface Tracked {
  readonly socket: net.Socket;
  readonly server: BudgetLease;
  /** Held while no request on the connection has shown a key; null once one did. */
  anonymous: BudgetLease | null;
  /** Requests being received or answered on it (an idle keep-alive connection has none). */
  busy: number;
  /** The latest request on it, until its response closes. */
  request: http.IncomingMessage | null;
  /** `socket.bytesRead` when that request's headers were parsed. */
  bytesReadAtRequest: number;
  /** performance.now() then. */
  requestAt: number;
  /** Bytes that had left the socket at the last sweep, and since when none left while bytes waited (0: not waiting). */
  writtenAtCheck: number;
  writeStalledSince: number;
}

export interface ProgressOptions {
  /** A request body must arrive at least this fast on average, after the grace. 0 disables. */
  minBodyBytesPerSecond: number;
  /** The time a body may take before its rate is held against the minimum. */
  bodyGraceMs: number;
  /** A connection with bytes waiting to be written of which none leaves for this long is closed. */
  responseStallMs: number;
  /** How often every connection is looked at. @default 1000 */
  sweepIntervalMs?: number;
}

/**
 * One sweep over every connection, once a second, instead of a timer per request (the hot path
 * makes none): a slow body, sent a byte at a time to hold the server's memory and a connection
 * for minutes (Node's own requestTimeout allows 5), is cut once it falls below the minimum rate
 * after its grace; a response whose client reads nothing while bytes wait for it (any response:
 * a download, a GraphQL answer, a WebSocket) is cut after `responseStallMs`. Streamed text
 * responses also watch themselves (response-flow.ts), cancelling their job; this is the floor
 * under every other surface, including ones added later.
 */
export class ConnectionProgress {
  private timer: NodeJS.Timeout | undefined;
  private slowBodies = 0;
  private stalledResponses = 0;

  constructor(private readonly options: ProgressOptions, private readonly logger: Logger) {}

  start(connections: () => Iterable<Tracked>): void {
    if (this.timer) return;
    this.timer = setInterval(() => this.sweep(connections(), performance.now()), this.options.sweepIntervalMs ?? 1_000);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Connections cut for a slow body and for a stalled response since start (tests, logs). */
  get stats(): { slowBodies: number; stalledResponses: number } {
    return { slowBodies: this.slowBodies, stalledResponses: this.stalledResponses };
  }

  sweep(connections: Iterable<Tracked>, now: number): void {
    const { minBodyBytesPerSecond, bodyGraceMs, responseStallMs } = this.options;
    for (const tracked of connections) {
      const { socket, request } = tracked;
      if (socket.destroyed) continue;
      if (minBodyBytesPerSecond > 0 && request && !request.complete) {
        const late = now - tracked.requestAt - bodyGraceMs;
        if (late > 0 && socket.bytesRead - tracked.bytesReadAtRequest < (late / 1000) * minBodyBytesPerSecond) {
          this.cut(socket, 'slow body');
          continue;
        }
      }
      if (socket.writableLength === 0) {
        tracked.writeStalledSince = 0;
        continue;
      }
      // bytesWritten counts bytes still queued too: what left is it minus what waits.
      const flushed = socket.bytesWritten - socket.writableLength;
      if (flushed !== tracked.writtenAtCheck || tracked.writeStalledSince === 0) {
        tracked.writtenAtCheck = flushed;
        tracked.writeStalledSince = now;
      } else if (now - tracked.writeStalledSince >= responseStallMs) {
        this.cut(socket, 'stalled response');
      }
    }
  }

  private cut(socket: net.Socket, why: 'slow body' | 'stalled response'): void {
    if (why === 'slow body') this.slowBodies += 1;
    else this.stalledResponses += 1;
    const count = why === 'slow body' ? this.slowBodies : this.stalledResponses;
    if (count % 1_000 === 1) this.logger.info({ why, count }, 'connections cut for making no progress');
    socket.destroy();
  }
}
