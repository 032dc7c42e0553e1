import type { DeploymentLoad, ServerLoad } from '../cluster/server-registry';
import { LATENCY_BUCKETS, percentileOf } from '../metrics-history/latency-buckets';

/** One server's published load (its registry row, or this server's snapshot now). */
export interface ServerLoadRow {
  readonly serverId: string;
  readonly load: ServerLoad;
}

/** A deployment's traffic and engine signals over every server: the inputs of issue 39 a ScalingObservation carries. */
export interface ClusterSignals {
  /** Owner arrivals per second over the rate window; undefined until some server's counter has two samples far enough apart. */
  readonly arrivalsPerSecond: number | undefined;
  /** Since the deployment's last arrival on any server (or, with none seen, since this server first looked at it). */
  readonly idleMs: number;
  readonly kvCacheUsage: number | null;
  /** p95 of the last minute's TTFT (text) or queue wait (media), ms; null without requests. */
  readonly observedP95Ms: number | null;
  /** Requests waiting at the gateways for a first replica (`DeploymentLoad.waiting`). */
  readonly waitingForReplica: number;
  /** Mean prefix-cache hit rate over the replicas whose engines report it; null when none does. */
  readonly prefixCacheHitRate: number | null;
  /** Mean prompt and completion tokens of the last minute's finished owner text requests; null without any. */
  readonly meanPromptTokens: number | null;
  readonly meanOutputTokens: number | null;
}

export interface ClusterSignalsOptions {
  /** Arrivals are counted over this window (the concurrency policy smooths its signal over as long). @default 10000 */
  rateWindowMs?: number;
  /** A rate needs two samples at least this far apart. @default 1000 */
  minRateSpanMs?: number;
}

interface Sample { at: number; count: number }

/** Samples of a server's counter that went unread this long are dropped (a server gone, a deployment deleted). */
const STALE_MS = 600_000;

/**
 * The cluster's view of each deployment's traffic, for the autoscaler's server: every server
 * publishes its own counts (server-scaling-signals.ts) in its registry row, and this adds them.
 * Arrivals are a counter per server, so their rate is taken per server over `rateWindowMs` of
 * this server's clock (a peer's row is at most one registry heartbeat old, at both ends of the
 * window alike) and summed: no arrival is counted twice or lost when the loop and the
 * heartbeats run at different intervals. A counter that goes back (a peer restarted under the
 * same id) starts that server's window again. Latency buckets add up exactly, so the p95 is of
 * every server's requests together.
 */
export class ClusterScalingSignals {
  private readonly rateWindowMs: number;
  private readonly minRateSpanMs: number;
  private readonly samples = new Map<string, Sample[]>();
  private readonly lastArrival = new Map<string, number>();
  private readonly firstSeen = new Map<string, number>();
  private sweptAt = 0;

  constructor(private readonly loads: () => Iterable<ServerLoadRow>, options: ClusterSignalsOptions = {}) {
    this.rateWindowMs = options.rateWindowMs ?? 10_000;
    this.minRateSpanMs = options.minRateSpanMs ?? 1_000;
  }

  observe(deploymentId: string, now: number): ClusterSignals {
    this.sweep(now);
    if (!this.firstSeen.has(deploymentId)) this.firstSeen.set(deploymentId, now);
    let arrivalsPerSecond: number | undefined;
    let lastArrivalAt = this.lastArrival.get(deploymentId) ?? null;
    let kvCacheUsage: number | null = null;
    let waitingForReplica = 0;
    let prefixSum = 0;
    let prefixReporting = 0;
    let requests = 0;
    let promptTokens = 0;
    let completionTokens = 0;
    const buckets = new Float64Array(LATENCY_BUCKETS);
    for (const { serverId, load: serverLoad } of this.loads()) {
      const load: DeploymentLoad | undefined = serverLoad[deploymentId];
      // A live server that counted none of the deployment's arrivals has its counter at 0: the rate is right from the first one.
      const rate = this.rateOf(`${serverId}|${deploymentId}`, load?.traffic?.arrivals ?? 0, now);
      if (rate !== undefined) arrivalsPerSecond = (arrivalsPerSecond ?? 0) + rate;
      if (!load) continue;
      waitingForReplica += load.waiting ?? 0;
      if (load.kvCacheUsage !== undefined) kvCacheUsage = Math.max(kvCacheUsage ?? 0, load.kvCacheUsage);
      if (load.prefixCacheHitRate !== undefined && load.prefixCacheReporting) {
        prefixSum += load.prefixCacheHitRate * load.prefixCacheReporting;
        prefixReporting += load.prefixCacheReporting;
      }
      const traffic = load.traffic;
      if (!traffic) continue;
      if (traffic.lastArrivalAt !== null) lastArrivalAt = Math.max(lastArrivalAt ?? 0, traffic.lastArrivalAt);
      for (const [bucket, count] of traffic.latencyBuckets) if (bucket >= 0 && bucket < LATENCY_BUCKETS) buckets[bucket] += count;
      requests += traffic.requests;
      promptTokens += traffic.promptTokens;
      completionTokens += traffic.completionTokens;
    }
    if (lastArrivalAt !== null) this.lastArrival.set(deploymentId, lastArrivalAt);
    const since = lastArrivalAt ?? this.firstSeen.get(deploymentId)!;
    return {
      arrivalsPerSecond,
      idleMs: Math.max(0, now - since),
      kvCacheUsage,
      observedP95Ms: percentileOf(buckets, 0.95),
      waitingForReplica,
      prefixCacheHitRate: prefixReporting > 0 ? prefixSum / prefixReporting : null,
      meanPromptTokens: requests > 0 ? promptTokens / requests : null,
      meanOutputTokens: requests > 0 ? completionTokens / requests : null,
    };
  }

  /** Drops what is remembered of a deployment (deleted, or no longer served). */
  forget(deploymentId: string): void {
    this.lastArrival.delete(deploymentId);
    this.firstSeen.delete(deploymentId);
    for (const key of this.samples.keys()) if (key.endsWith(`|${deploymentId}`)) this.samples.delete(key);
  }

  /** The counter's rate over the window ending now, or undefined before two samples far enough apart. */
  private rateOf(key: string, count: number, now: number): number | undefined {
    let samples = this.samples.get(key);
    if (!samples) this.samples.set(key, (samples = []));
    if (samples.length > 0 && count < samples[samples.length - 1].count) samples.length = 0;
    samples.push({ at: now, count });
    // Keep the newest sample at least a window old (the window's start) and everything after it.
    while (samples.length > 2 && samples[1].at <= now - this.rateWindowMs) samples.shift();
    const first = samples[0];
    const span = now - first.at;
    return span >= this.minRateSpanMs ? ((count - first.count) * 1000) / span : undefined;
  }

  private sweep(now: number): void {
    if (now - this.sweptAt < STALE_MS) return;
    this.sweptAt = now;
    for (const [key, samples] of this.samples) if (samples[samples.length - 1].at < now - STALE_MS) this.samples.delete(key);
  }
}
