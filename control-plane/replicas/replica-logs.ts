import type { ControlPlaneEvents } from '../events/control-plane-events';
import { readAgentLogLine, type ReplicaLogLevel, type ReplicaLogSource } from './agent-log-record';

/** One line of a replica's log, scrubbed (agent-log-record.ts), as its workspace reads it. */
export interface ReplicaLogLine {
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly workspaceId: string;
  /**
   * Increasing per replica on the server that holds its agent (from 1): a reader that got the
   * backlog and the stream skips what it already has.
   */
  readonly seq: number;
  readonly at: Date;
  readonly level: ReplicaLogLevel;
  readonly source: ReplicaLogSource;
  readonly message: string;
}

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** A replica's agent printed a line (emitted where its agent is, and re-emitted on the other servers by cluster/event-bridge.ts). */
    replicaLogLine: [ReplicaLogLine];
  }
}

/** Whose line it is. */
export interface ReplicaLogOwner {
  readonly replicaId: string;
  readonly deploymentId: string;
  readonly workspaceId: string;
}

export interface ReplicaLogOptions {
  /** Lines kept per replica, newest last. @default 200 */
  linesPerReplica: number;
  /** Replicas whose lines are kept; past it the one written to least recently is forgotten. @default 256 */
  maxReplicas: number;
  /** Characters a line keeps. @default 400 */
  maxLineChars: number;
  /** Lines a replica may add per second, on average... @default 10 */
  linesPerSecond: number;
  /** ...and at once (a start-up, a crash's last words). @default 50 */
  burstLines: number;
}

export const DEFAULT_REPLICA_LOG_OPTIONS: ReplicaLogOptions = { linesPerReplica: 200, maxReplicas: 256, maxLineChars: 400, linesPerSecond: 10, burstLines: 50 };

/**
 * The recent lines of each replica's agent and engine, in memory: a ring of `linesPerReplica`
 * lines for each of at most `maxReplicas` replicas, each line at most `maxLineChars` (with the
 * defaults, about 20 MB at worst). An agent printing in a loop is held to `linesPerSecond`
 * (a token bucket of `burstLines`); what it drops is counted in a line of its own, so the
 * reader knows lines are missing. Every line kept is emitted as `replicaLogLine`, for the
 * deployment's subscribers here and, through the event bridge, on every other server, which
 * keep it too (`mirror`): any server answers the backlog of any replica, for the lines written
 * since it started.
 */
export class ReplicaLogs {
  private readonly rings = new Map<string, Ring>();
  private readonly options: ReplicaLogOptions;

  constructor(private readonly events: ControlPlaneEvents, options: Partial<ReplicaLogOptions> = {}, private readonly now: () => number = Date.now) {
    this.options = { ...DEFAULT_REPLICA_LOG_OPTIONS, ...options };
  }

  /** A line a replica's agent on this server printed: read, scrubbed, kept and emitted, unless over its rate. */
  append(owner: ReplicaLogOwner, text: string): void {
    const ring = this.ringOf(owner);
    if (!ring.take(this.now(), this.options)) {
      ring.dropped += 1;
      return;
    }
    const at = new Date(this.now());
    if (ring.dropped > 0) {
      const message = `${ring.dropped} line(s) not kept: the agent printed more than ${this.options.linesPerSecond} a second`;
      ring.dropped = 0;
      this.keep(ring, { ...owner, seq: ring.nextSeq(), at, level: 'warn', source: 'agent', message });
    }
    const record = readAgentLogLine(text, this.options.maxLineChars);
    if (!record.message) return;
    this.keep(ring, { ...owner, seq: ring.nextSeq(), at, ...record });
  }

  /** A line another server kept (its agent is there): kept here too, and told to this server's subscribers. */
  mirror(line: ReplicaLogLine): void {
    this.keep(this.ringOf(line), line);
  }

  /**
   * The newest `limit` lines of the deployment's replicas (or of one of them), oldest first.
   * Callers check the deployment is the caller's; the workspace is checked again here.
   */
  recent(workspaceId: string, deploymentId: string, options: { replicaId?: string | null; limit: number }): ReplicaLogLine[] {
    const lines: ReplicaLogLine[] = [];
    for (const [replicaId, ring] of this.rings) {
      if (options.replicaId && replicaId !== options.replicaId) continue;
      if (ring.deploymentId !== deploymentId || ring.workspaceId !== workspaceId) continue;
      lines.push(...ring.lines());
    }
    lines.sort((a, b) => a.at.getTime() - b.at.getTime() || a.seq - b.seq);
    return lines.slice(-options.limit);
  }

  /** Replicas with lines kept now (tests, metrics). */
  get size(): number {
    return this.rings.size;
  }

  private keep(ring: Ring, line: ReplicaLogLine): void {
    ring.push(line, this.options.linesPerReplica);
    this.events.emit('replicaLogLine', line);
  }

  /** The replica's ring, now the most recently written; the least recently written beyond `maxReplicas` is dropped. */
  private ringOf(owner: ReplicaLogOwner): Ring {
    let ring = this.rings.get(owner.replicaId);
    if (ring) {
      this.rings.delete(owner.replicaId);
    } else {
      ring = new Ring(owner.deploymentId, owner.workspaceId, this.options.burstLines, this.now());
    }
    this.rings.set(owner.replicaId, ring);
    if (this.rings.size > this.options.maxReplicas) this.rings.delete(this.rings.keys().next().value as string);
    return ring;
  }
}

/** One replica's lines, its rate bucket and its sequence. */
class Ring {
  dropped = 0;
  private readonly kept: ReplicaLogLine[] = [];
  private start = 0;
  private seq = 0;
  private tokens: number;
  private refilledAt: number;

  constructor(readonly deploymentId: string, readonly workspaceId: string, burst: number, now: number) {
    this.tokens = burst;
    this.refilledAt = now;
  }

  take(now: number, options: ReplicaLogOptions): boolean {
    this.tokens = Math.min(options.burstLines, this.tokens + ((now - this.refilledAt) / 1000) * options.linesPerSecond);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  nextSeq(): number {
    return ++this.seq;
  }

  push(line: ReplicaLogLine, capacity: number): void {
    if (this.kept.length < capacity) {
      this.kept.push(line);
      return;
    }
    this.kept[this.start] = line;
    this.start = (this.start + 1) % capacity;
  }

  lines(): ReplicaLogLine[] {
    return [...this.kept.slice(this.start), ...this.kept.slice(0, this.start)];
  }
}
