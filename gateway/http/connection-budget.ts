import fs from 'node:fs';
import type http from 'node:http';
import type net from 'node:net';
import type { Logger } from 'pino';
import { AppError } from '../../control-plane/api/errors';
import type { BudgetLease, TenantBudget } from '../../control-plane/api/inference';
import { ConnectionProgress, type ProgressOptions, type Tracked } from './connection-progress';

/**
 * Every TCP connection of the HTTP server holds the `connections` budget: one of the server's
 * (MAX_CONNECTIONS) and, until a request on it shows a valid key, one of its client address's
 * (MAX_ANONYMOUS_CONNECTIONS_PER_ADDRESS). 19,980 anonymous half-open connections took all
 * 20,000 file descriptors of the process before; nothing was left for the database, the agents
 * or the next client.
 *
 * At the server's cap a new connection is not simply dropped: the oldest anonymous connection
 * with nothing in flight (a half-open one, or one that never showed a key) makes room for it,
 * so a flood of idle sockets cannot lock clients out; only when there is none is the new one
 * closed. Connections with a key are never evicted for a newcomer. Headers must arrive within
 * the server's headersTimeout; bodies at a minimum rate, and responses must make progress
 * (connection-progress.ts).
 */
export class ConnectionBudget {
  private readonly tracked = new Map<net.Socket, Tracked>();
  private refusedCount = 0;
  private evictedCount = 0;
  private readonly progress: ConnectionProgress;

  constructor(private readonly budget: TenantBudget, progress: ProgressOptions, private readonly logger: Logger) {
    this.progress = new ConnectionProgress(progress, logger);
  }

  /** Tracks every connection of `server` from its first byte, and watches their progress until `stop`. */
  attach(server: http.Server): void {
    server.on('connection', (socket) => this.accept(socket));
    server.on('request', (request: http.IncomingMessage, response: http.ServerResponse) => {
      const tracked = this.tracked.get(request.socket);
      if (!tracked) return;
      tracked.busy += 1;
      tracked.request = request;
      tracked.bytesReadAtRequest = request.socket.bytesRead;
      tracked.requestAt = performance.now();
      response.once('close', () => {
        tracked.busy -= 1;
        if (tracked.request === request) tracked.request = null;
      });
    });
    this.progress.start(() => this.tracked.values());
  }

  stop(): void {
    this.progress.stop();
  }

  /** A request on `socket` showed a valid key: the connection no longer counts as its address's anonymous one. */
  identified(socket: net.Socket): void {
    const tracked = this.tracked.get(socket);
    if (!tracked?.anonymous) return;
    tracked.anonymous.release();
    tracked.anonymous = null;
  }

  /** Open connections now; refused, evicted and cut for making no progress since start (tests, metrics). */
  get stats(): { open: number; refused: number; evicted: number; slowBodies: number; stalledResponses: number } {
    return { open: this.tracked.size, refused: this.refusedCount, evicted: this.evictedCount, ...this.progress.stats };
  }

  private accept(socket: net.Socket): void {
    const address = socket.remoteAddress ?? 'unknown';
    const anonymous = this.budget.take('connections', { address }, 1, 'address');
    if (isRefusal(anonymous)) return this.refuse(socket, anonymous);
    let server = this.budget.take('connections', {});
    if (isRefusal(server) && this.evictOne()) server = this.budget.take('connections', {});
    if (isRefusal(server)) {
      anonymous.release();
      return this.refuse(socket, server);
    }
    const tracked: Tracked = { socket, server, anonymous, busy: 0, request: null, bytesReadAtRequest: 0, requestAt: 0, writtenAtCheck: 0, writeStalledSince: 0 };
    this.tracked.set(socket, tracked);
    socket.once('close', () => {
      this.tracked.delete(socket);
      tracked.server.release();
      tracked.anonymous?.release();
    });
  }

  /** Closes the oldest anonymous connection with nothing in flight; false when there is none. */
  private evictOne(): boolean {
    // A Map iterates in insertion order: the first match is the oldest.
    for (const tracked of this.tracked.values()) {
      if (!tracked.anonymous || tracked.busy > 0) continue;
      this.evictedCount += 1;
      this.release(tracked);
      tracked.socket.destroy();
      return true;
    }
    return false;
  }

  /** Gives a connection's holds back at once (its 'close' comes a tick later, and a newcomer is waiting for them). */
  private release(tracked: Tracked): void {
    this.tracked.delete(tracked.socket);
    tracked.server.release();
    tracked.anonymous?.release();
    tracked.anonymous = null;
  }

  private refuse(socket: net.Socket, refusal: AppError): void {
    this.refusedCount += 1;
    // Nothing was read: no HTTP answer can be framed for a request not yet sent. The count and
    // one log line per thousand say what happened (a log line per refusal would be the flood's amplifier).
    if (this.refusedCount % 1_000 === 1) this.logger.warn({ refused: this.refusedCount, reason: refusal.message }, 'connections refused by the connection budget');
    socket.destroy();
  }
}

function isRefusal(value: BudgetLease | AppError): value is AppError {
  return value instanceof AppError;
}

/**
 * The process's open-file limit (RLIMIT_NOFILE, soft), read from /proc on Linux; null elsewhere.
 * The connection cap must stay under it with room for the database pool, agents' pipes and files.
 */
export function openFileLimit(): number | null {
  try {
    const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((row) => row.startsWith('Max open files'));
    const soft = Number(line?.trim().split(/\s+/)[3]);
    return Number.isSafeInteger(soft) && soft > 0 ? soft : null;
  } catch {
    return null;
  }
}

/** File descriptors kept out of the connection cap for everything else the server opens. */
export const RESERVED_FILE_DESCRIPTORS = 1_024;

/**
 * The server's connection cap as configured, lowered to fit the process's open files with
 * RESERVED_FILE_DESCRIPTORS to spare (a cap above them is a cap that never binds).
 */
export function connectionCap(configured: number, openFiles = openFileLimit()): number {
  if (openFiles === null) return configured;
  return Math.min(configured, Math.max(64, openFiles - RESERVED_FILE_DESCRIPTORS));
}
