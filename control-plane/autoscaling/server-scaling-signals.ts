import type { DeploymentTraffic } from '../cluster/server-registry';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { SloTargets } from '../deployments/scaling-policy-names';
import { sloOf } from '../deployments/scaling-settings';
import { latencyBucket } from '../metrics-history/latency-buckets';
import type { FinishedRequest, RequestObserver } from '../pipeline/finished-request';

/** The recent window is this many slots of SLOT_MS: the last minute, give or take one slot. */
const SLOT_MS = 10_000;
const SLOTS = 6;
/** A deployment that had no request for this long is forgotten here (the leader keeps its own last arrival). */
const FORGET_AFTER_MS = 3_600_000;

interface Slot {
  start: number;
  readonly buckets: Map<number, number>;
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

interface DeploymentEntry {
  arrivals: number;
  lastArrivalAt: number | null;
  lastActivityAt: number;
  /** Oldest first, each SLOT_MS long, only slots that saw something. */
  readonly slots: Slot[];
}

/**
 * What this server sees of each deployment's owner traffic, for the `slo` autoscaler and scale
 * to zero (issue 39): a counter of arrivals and the last one's time, and over the last minute
 * the TTFT of streamed owner text requests (or the queue wait of media jobs it started) in
 * latency buckets, with the finished requests' token counts. The server registry publishes it
 * in this server's row (`DeploymentLoad.traffic`); the autoscaler's server adds every
 * server's (cluster-scaling-signals.ts), so no figure depends on which server a request reached.
 *
 * It also knows each deployment's SLO (learned from the row of each arrival, from updates, and
 * read once when a deployment is first met otherwise), for the minute rollups' within-SLO count.
 * Per request: a map lookup and a few additions; guests and batch lines are not counted (they
 * fill idle capacity and never buy replicas).
 */
export class ServerScalingSignals implements RequestObserver {
  private readonly entries = new Map<string, DeploymentEntry>();
  private readonly slos = new Map<string, SloTargets | null>();
  private readonly reading = new Set<string>();

  constructor(
    private readonly deployments: Pick<DeploymentStore, 'find'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** An owner request admitted for `deployment` (the pipeline calls it once per request). */
  arrived(deployment: Pick<Deployment, 'id' | 'sloTtftP95Ms' | 'sloTpotP95Ms' | 'sloQueueWaitP95Ms'>): void {
    const now = this.now();
    const entry = this.entryOf(deployment.id, now);
    entry.arrivals++;
    entry.lastArrivalAt = now;
    this.learn(deployment);
  }

  /** The deployment's SLO as this server last saw its row (null: none stated, or not read yet: its read starts now). */
  sloOf(deploymentId: string): SloTargets | null {
    const known = this.slos.get(deploymentId);
    if (known !== undefined) return known;
    if (!this.reading.has(deploymentId)) {
      this.reading.add(deploymentId);
      this.deployments.find(deploymentId).then((row) => {
        if (row && !this.slos.has(deploymentId)) this.learn(row);
      }, () => {}).finally(() => this.reading.delete(deploymentId));
    }
    return null;
  }

  /** A deployment row seen (an arrival, an update on any server): its SLO from now on. Allocates only when it changed (once per request otherwise). */
  learn(deployment: Pick<Deployment, 'id' | 'sloTtftP95Ms' | 'sloTpotP95Ms' | 'sloQueueWaitP95Ms'>): void {
    const known = this.slos.get(deployment.id);
    if (known !== undefined && (known?.ttftP95Ms ?? null) === (deployment.sloTtftP95Ms ?? null) && (known?.tpotP95Ms ?? null) === (deployment.sloTpotP95Ms ?? null)
      && (known?.queueWaitP95Ms ?? null) === (deployment.sloQueueWaitP95Ms ?? null)) return;
    this.slos.set(deployment.id, sloOf(deployment));
  }

  requestFinished(request: FinishedRequest): void {
    if (request.sharedModel !== null || request.batchId !== undefined) return;
    const now = this.now();
    const slot = this.slotOf(this.entryOf(request.deploymentId, now), now);
    if (request.ttftMs !== null) slot.buckets.set(latencyBucket(request.ttftMs), (slot.buckets.get(latencyBucket(request.ttftMs)) ?? 0) + 1);
    if (request.outcome === 'succeeded') {
      slot.requests++;
      slot.promptTokens += request.promptTokens;
      slot.completionTokens += request.completionTokens;
    }
  }

  /** A media job this server started after `queueWaitMs` in the durable queue. */
  mediaStarted(deploymentId: string, queueWaitMs: number): void {
    const now = this.now();
    const slot = this.slotOf(this.entryOf(deploymentId, now), now);
    const bucket = latencyBucket(Math.max(0, queueWaitMs));
    slot.buckets.set(bucket, (slot.buckets.get(bucket) ?? 0) + 1);
  }

  /** Every deployment's traffic here, as the registry publishes it; forgets deployments quiet for an hour. */
  snapshot(): Record<string, DeploymentTraffic> {
    const now = this.now();
    const snapshot: Record<string, DeploymentTraffic> = {};
    for (const [deploymentId, entry] of this.entries) {
      if (now - entry.lastActivityAt > FORGET_AFTER_MS) {
        this.entries.delete(deploymentId);
        continue;
      }
      dropOldSlots(entry, now);
      const buckets = new Map<number, number>();
      const traffic: DeploymentTraffic = { arrivals: entry.arrivals, lastArrivalAt: entry.lastArrivalAt, latencyBuckets: [], requests: 0, promptTokens: 0, completionTokens: 0 };
      for (const slot of entry.slots) {
        for (const [bucket, count] of slot.buckets) buckets.set(bucket, (buckets.get(bucket) ?? 0) + count);
        traffic.requests += slot.requests;
        traffic.promptTokens += slot.promptTokens;
        traffic.completionTokens += slot.completionTokens;
      }
      traffic.latencyBuckets = [...buckets].sort((a, b) => a[0] - b[0]);
      snapshot[deploymentId] = traffic;
    }
    return snapshot;
  }

  private entryOf(deploymentId: string, now: number): DeploymentEntry {
    let entry = this.entries.get(deploymentId);
    if (!entry) {
      entry = { arrivals: 0, lastArrivalAt: null, lastActivityAt: now, slots: [] };
      this.entries.set(deploymentId, entry);
    }
    entry.lastActivityAt = now;
    return entry;
  }

  private slotOf(entry: DeploymentEntry, now: number): Slot {
    const start = now - (now % SLOT_MS);
    const last = entry.slots.at(-1);
    if (last && last.start === start) return last;
    dropOldSlots(entry, now);
    const slot: Slot = { start, buckets: new Map(), requests: 0, promptTokens: 0, completionTokens: 0 };
    entry.slots.push(slot);
    return slot;
  }
}

function dropOldSlots(entry: DeploymentEntry, now: number): void {
  while (entry.slots.length > 0 && entry.slots[0].start <= now - SLOT_MS * SLOTS) entry.slots.shift();
}
