import { AppError } from '../errors/app-error';
import type { Deployment } from '../deployments/deployment.entity';
import { scalesToZero } from '../deployments/scaled-to-zero';

/** What the queue reads of a deployment (its row, as the request resolved it). */
export type ColdStartDeployment = Pick<Deployment, 'id' | 'scaleToZeroAfterSeconds' | 'coldStartQueueLimit'>;

export interface ColdStartQueueOptions {
  /** The longest a request waits for a replica; past it, 503 `no_pod_available` with Retry-After. */
  maxWaitMs: number;
  /** How long a replica's start-up is taken to last until one has been seen here (Retry-After's estimate). */
  startupEstimateMs: number;
}

export interface ColdStartQueueParts {
  /** A replica of the deployment takes work, on this server or a peer. */
  hasReplica(deploymentId: string): boolean;
  /** Requests wait for a first replica of the deployment: the capacity loop should decide now (throttled here). */
  coldStart(deploymentId: string): void;
  /** A request was refused past the queue's bounds (the refusals counter). */
  refused(deploymentId: string, reason: ColdStartRefusal): void;
  /** The clock in milliseconds. @default Date.now */
  now?: () => number;
}

/** `queue_full`: past the deployment's coldStartQueueLimit at this server; `max_wait`: no replica within the longest wait. */
export type ColdStartRefusal = 'queue_full' | 'max_wait';

/** A waiting request's client, as its transport sees it. */
export interface ClientPresence {
  /**
   * Calls `left` once if the client goes away, and returns what stops listening: the request
   * then leaves the queue at once. Absent: the transport cannot tell, and the request waits out
   * its bounds.
   */
  onLeft?(left: () => void): () => void;
}

interface Waiter {
  readonly since: number;
  readonly resolve: (waitedMs: number | null) => void;
  readonly reject: (error: AppError) => void;
  timer: NodeJS.Timeout | undefined;
  stopListening: () => void;
}

interface Line {
  /** First come, first released. */
  readonly waiters: Waiter[];
  /** When the first of these waiters came: the cold start as this server sees it. */
  readonly since: number;
}

/** A cold start is announced to the capacity loops at most this often per deployment. */
const ANNOUNCE_EVERY_MS = 1_000;
/** Retry-After never says less than this: a start-up running late gets a few seconds more, not a retry storm. */
const MIN_RETRY_AFTER_SECONDS = 2;

/**
 * Requests that find no ready replica of their deployment on any server wait here, per
 * deployment and first in first out, while one starts, instead of the immediate 503. Only a
 * deployment that opted into scale to zero waits (its next request always finds none): the
 * contract lists a starting replica among 503 `no_pod_available`'s cases, so every other
 * deployment keeps answering it at once. Bounded twice: at most the
 * deployment's `coldStartQueueLimit` wait at this server, each at most `maxWaitMs`; past either,
 * 503 `no_pod_available` with a Retry-After of the start-up still to go (the last one measured
 * here, else `startupEstimateMs`). Released all at once, in arrival order, when a replica joins
 * this server (`capacity`) or a peer reports one (`peersChanged`). A request whose client
 * leaves goes at once and frees its place; nothing ran, so nothing is billed.
 */
export class ColdStartQueue {
  private readonly lines = new Map<string, Line>();
  /** Per deployment: the last start-up seen here, first wait to release (ms). */
  private readonly startups = new Map<string, number>();
  private readonly announced = new Map<string, number>();
  private readonly now: () => number;

  constructor(private readonly parts: ColdStartQueueParts, private readonly options: ColdStartQueueOptions) {
    this.now = parts.now ?? Date.now;
  }

  /**
   * Null when the request can go on now: a replica takes work somewhere, or none is coming (the
   * dispatch then answers its usual 503). Otherwise the wait: it resolves with the milliseconds
   * waited once a replica is there, with null when the client left first, and rejects with 503
   * `no_pod_available` past the bounds. `maxWaitMs` shortens the wait (a sync image call's budget).
   */
  wait(deployment: ColdStartDeployment, client: ClientPresence | null, maxWaitMs = this.options.maxWaitMs): Promise<number | null> | null {
    // Only a deployment that opted into scale to zero waits: for the others the contract answers
    // 503 `no_pod_available` while no replica is ready, starting ones included (docs/api-contract.md).
    if (!scalesToZero(deployment) || this.parts.hasReplica(deployment.id)) return null;
    return this.enqueue(deployment, client, maxWaitMs);
  }

  /**
   * A request found no replica and did not wait here (a background response, which its runner
   * retries): at a deployment that scales to zero it still starts one, or it never would.
   */
  noReplica(deployment: ColdStartDeployment): void {
    if (scalesToZero(deployment) && !this.parts.hasReplica(deployment.id)) this.announce(deployment.id);
  }

  /** A replica of the deployment joined this server or gained a free slot (Dispatcher.onCapacity). */
  capacity(deploymentId: string): void {
    if (this.lines.has(deploymentId)) this.releaseIfReady(deploymentId);
  }

  /** Peers reported their replicas (a registry heartbeat): one of theirs may take the waiting requests. */
  peersChanged(): void {
    for (const deploymentId of [...this.lines.keys()]) this.releaseIfReady(deploymentId);
  }

  /** Requests waiting here for a replica of the deployment. */
  waiting(deploymentId: string): number {
    return this.lines.get(deploymentId)?.waiters.length ?? 0;
  }

  /** LocalDemand (server-registry.ts): the requests waiting here, published with this server's load. */
  forEachDeployment(visit: (deploymentId: string, waiting: number) => void): void {
    for (const [deploymentId, line] of this.lines) if (line.waiters.length > 0) visit(deploymentId, line.waiters.length);
  }

  /** Every deployment with requests waiting here, and how many (the waiting-requests gauge). */
  waitingRows(): Array<{ deployment: string; waiting: number }> {
    return [...this.lines].map(([deployment, line]) => ({ deployment, waiting: line.waiters.length }));
  }

  private enqueue(deployment: ColdStartDeployment, client: ClientPresence | null, maxWaitMs: number): Promise<number | null> {
    const { id } = deployment;
    // A replica may have joined while a starting one was looked up.
    if (this.parts.hasReplica(id)) return Promise.resolve(0);
    this.announce(id);
    const now = this.now();
    const line = this.lines.get(id);
    const count = line?.waiters.length ?? 0;
    if (count >= deployment.coldStartQueueLimit) {
      this.parts.refused(id, 'queue_full');
      return Promise.reject(new AppError('no_pod_available',
        `${count} requests already wait at this server for a replica of this deployment to start (its coldStartQueueLimit is ${deployment.coldStartQueueLimit}); retry after the Retry-After`,
        { retryAfterSeconds: this.retryAfterSeconds(id, line?.since ?? now) }));
    }
    const waiters = line?.waiters ?? [];
    if (!line) this.lines.set(id, { waiters, since: now });
    return new Promise<number | null>((resolve, reject) => {
      const waiter: Waiter = { since: now, resolve, reject, timer: undefined, stopListening: () => {} };
      waiters.push(waiter);
      waiter.timer = setTimeout(() => {
        if (!this.remove(id, waiter)) return;
        this.parts.refused(id, 'max_wait');
        reject(new AppError('no_pod_available', `no replica of this deployment was ready within ${Math.round(maxWaitMs / 1000)} s of waiting; retry after the Retry-After`,
          { retryAfterSeconds: this.retryAfterSeconds(id, this.lines.get(id)?.since ?? waiter.since) }));
      }, maxWaitMs);
      if (!client?.onLeft) return;
      const stopListening = client.onLeft(() => {
        if (this.remove(id, waiter)) resolve(null);
      });
      // A client gone already left at once (above): nothing more to listen to.
      if (waiters.includes(waiter)) waiter.stopListening = stopListening;
      else stopListening();
    });
  }

  private releaseIfReady(deploymentId: string): void {
    const line = this.lines.get(deploymentId);
    if (!line || !this.parts.hasReplica(deploymentId)) return;
    this.lines.delete(deploymentId);
    const now = this.now();
    this.startups.set(deploymentId, now - line.since);
    // In arrival order: each continues (and dispatches) in the order it is resolved.
    for (const waiter of line.waiters) {
      clearTimeout(waiter.timer);
      waiter.stopListening();
      waiter.resolve(now - waiter.since);
    }
  }

  /** Takes the waiter out (its timer and client listener with it); false when it had already gone. */
  private remove(deploymentId: string, waiter: Waiter): boolean {
    const line = this.lines.get(deploymentId);
    const index = line ? line.waiters.indexOf(waiter) : -1;
    if (!line || index < 0) return false;
    line.waiters.splice(index, 1);
    if (line.waiters.length === 0) this.lines.delete(deploymentId);
    clearTimeout(waiter.timer);
    waiter.stopListening();
    return true;
  }

  /** The start-up still to go, in whole seconds: the last one measured here (or the estimate) less what has passed. */
  private retryAfterSeconds(deploymentId: string, since: number): number {
    const expected = this.startups.get(deploymentId) ?? this.options.startupEstimateMs;
    return Math.max(MIN_RETRY_AFTER_SECONDS, Math.ceil((expected - (this.now() - since)) / 1000));
  }

  private announce(deploymentId: string): void {
    const now = this.now();
    if (now - (this.announced.get(deploymentId) ?? -Infinity) < ANNOUNCE_EVERY_MS) return;
    this.announced.set(deploymentId, now);
    this.parts.coldStart(deploymentId);
  }
}
