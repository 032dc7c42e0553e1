import type { FinishedRequest, RequestObserver } from '../pipeline/finished-request';
import type { SloTargets } from '../deployments/scaling-policy-names';
import { LATENCY_BUCKETS, latencyBucket } from './latency-buckets';

/** One deployment's minute, as this server counted it since its last write. */
export class MinuteCounts {
  requests = 0;
  errors = 0;
  tokensIn = 0;
  tokensOut = 0;
  gpuCostUsd = 0;
  /** Owner requests admitted in the minute (every endpoint, media too). */
  arrivals = 0;
  /** Requests judged against the deployment's SLO (streamed owner text: TTFT; media: queue wait), and of those, the ones that met it. */
  sloRequests = 0;
  withinSlo = 0;
  readonly latency = new Uint32Array(LATENCY_BUCKETS);
  readonly ttft = new Uint32Array(LATENCY_BUCKETS);

  constructor(readonly deploymentId: string, readonly minute: number) {}

  /** Adds `other`'s counts (a failed write's rows going back). */
  add(other: MinuteCounts): void {
    this.requests += other.requests;
    this.errors += other.errors;
    this.tokensIn += other.tokensIn;
    this.tokensOut += other.tokensOut;
    this.gpuCostUsd += other.gpuCostUsd;
    this.arrivals += other.arrivals;
    this.sloRequests += other.sloRequests;
    this.withinSlo += other.withinSlo;
    for (let index = 0; index < LATENCY_BUCKETS; index++) {
      this.latency[index] += other.latency[index];
      this.ttft[index] += other.ttft[index];
    }
  }
}

const MINUTE_MS = 60_000;

/**
 * Per-deployment minute counts of the requests this server settled (a RequestObserver) and of
 * the GPU time its metering passes billed, held in memory until the next write
 * (rollup-writer.ts). Per request: a map lookup (skipped while requests keep to the last
 * deployment and minute), four additions and two bucket increments; nothing is allocated but
 * one MinuteCounts per deployment and minute.
 *
 * A request counts in the minute it ended. Guests' requests count on the owner's deployment
 * that served them (its load and latency), batch lines in its requests and tokens but not in
 * its latency and TTFT, which describe live traffic (a line's time is mostly its wait for free
 * capacity).
 *
 * Against the deployment's SLO (issue 39), counted where it is measured: a streamed owner text
 * request when it ends (its TTFT against the TTFT target), a media job when it starts (its
 * queue wait against the queue-wait target). Guests are not judged: the SLO is the owner's
 * promise to its own callers. Arrivals count in the minute they were admitted.
 */
export class MinuteRollups implements RequestObserver {
  /** Each deployment's minutes, oldest first: the one a request needs is almost always the last. */
  private pending = new Map<string, MinuteCounts[]>();

  /** @param sloOf the deployment's SLO as this server knows it, synchronously (null: none stated, or not known yet). */
  constructor(private readonly sloOf: (deploymentId: string) => SloTargets | null = () => null) {}

  requestFinished(request: FinishedRequest): void {
    const counts = this.countsOf(request.deploymentId, Math.floor((request.startedAt + request.latencyMs) / MINUTE_MS));
    counts.requests++;
    if (request.outcome === 'failed') counts.errors++;
    counts.tokensIn += request.promptTokens;
    counts.tokensOut += request.completionTokens;
    if (request.batchId !== undefined) return;
    counts.latency[latencyBucket(request.latencyMs)]++;
    if (request.ttftMs === null) return;
    counts.ttft[latencyBucket(request.ttftMs)]++;
    const target = request.sharedModel === null ? this.sloOf(request.deploymentId)?.ttftP95Ms ?? null : null;
    if (target !== null) {
      counts.sloRequests++;
      if (request.ttftMs <= target) counts.withinSlo++;
    }
  }

  /** An owner request admitted for the deployment now. */
  arrived(deploymentId: string, now: number = Date.now()): void {
    this.countsOf(deploymentId, Math.floor(now / MINUTE_MS)).arrivals++;
  }

  /** A media job started after `queueWaitMs` in the queue: judged against the queue-wait target, if one is stated. */
  mediaStarted(deploymentId: string, queueWaitMs: number, now: number = Date.now()): void {
    const target = this.sloOf(deploymentId)?.queueWaitP95Ms ?? null;
    if (target === null) return;
    const counts = this.countsOf(deploymentId, Math.floor(now / MINUTE_MS));
    counts.sloRequests++;
    if (queueWaitMs <= target) counts.withinSlo++;
  }

  /** GPU time billed now to each deployment (Metering's charges): it counts in the minute it was billed. */
  charged(charges: ReadonlyArray<{ deploymentId: string; amount: number }>, now: number = Date.now()): void {
    const minute = Math.floor(now / MINUTE_MS);
    for (const charge of charges) if (charge.amount > 0) this.countsOf(charge.deploymentId, minute).gpuCostUsd += charge.amount;
  }

  /** Everything counted since the last take; the counts start again from zero. */
  take(): MinuteCounts[] {
    const taken: MinuteCounts[] = [];
    for (const minutes of this.pending.values()) taken.push(...minutes);
    this.pending = new Map();
    return taken;
  }

  /** Counts that could not be written go back, added to whatever was counted meanwhile. */
  putBack(counts: readonly MinuteCounts[]): void {
    for (const entry of counts) this.countsOf(entry.deploymentId, entry.minute).add(entry);
  }

  /** How many deployment minutes wait for the next write. */
  get size(): number {
    let size = 0;
    for (const minutes of this.pending.values()) size += minutes.length;
    return size;
  }

  private countsOf(deploymentId: string, minute: number): MinuteCounts {
    let minutes = this.pending.get(deploymentId);
    if (!minutes) {
      minutes = [];
      this.pending.set(deploymentId, minutes);
    }
    for (let index = minutes.length - 1; index >= 0; index--) if (minutes[index].minute === minute) return minutes[index];
    const counts = new MinuteCounts(deploymentId, minute);
    minutes.push(counts);
    if (minutes.length > 1 && minutes[minutes.length - 2].minute > minute) minutes.sort((a, b) => a.minute - b.minute);
    return counts;
  }
}
