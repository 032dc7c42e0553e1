import { AppError } from '../errors/app-error';
import { seededRandom } from '../../common/seeded-random';
import { shouldRecord } from './decision-recording';
import { withScaleToZero } from './scale-to-zero';
import type { RequestTrace } from './load-traces';
import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicy, SloTargets } from './scaling-policy';
import { prefillMs, slotHoldMs, type ServiceModel } from './service-model';

/** Text is held to its time to first token; media (one job per slot, no tokens streamed) to its queue wait. */
export type DeploymentKind = 'text' | 'media';

export interface RequestSimulationOptions<State> {
  trace: RequestTrace;
  /** What one replica does: slots, prefill and decode rates, prefix hits, mean start-up. */
  model: ServiceModel;
  /** Asked every decision interval with what production would observe. */
  policy?: ScalingPolicy<State>;
  /** Instead of a policy: the replicas wanted at each moment, fixed in advance (the oracle's schedule). */
  replicasAt?: (now: number) => number;
  /** @default 'text' */
  kind?: DeploymentKind;
  slo: SloTargets;
  targetConcurrency: number;
  minReplicas: number;
  maxReplicas: number;
  /** @default true */
  autoscale?: boolean;
  capacityLimit?: number | null;
  /** Ready at 0 (they were started before the trace). @default max(1, minReplicas) */
  initialReplicas?: number;
  /** Each start takes `model.startupMs` plus or minus up to this much, uniformly. @default 0 */
  startupJitterMs?: number;
  /** Seeds the start-up variation. @default 1 */
  startupSeed?: number;
  /** @default 5000 */
  decisionIntervalMs?: number;
  /** Scale to zero after this long without a request (the contract's rule, applied here). @default null */
  scaleToZeroAfterMs?: number | null;
  /** Requests that may wait while no replica is ready; past it they are refused (a 503). @default 100 */
  coldStartQueueLimit?: number;
  /** Whether observations carry `serviceModel` (without it the `slo` policy derives one). @default true */
  reportServiceModel?: boolean;
}

export interface Percentiles { p50: number; p95: number; p99: number; max: number }

export interface RequestSimulationResult {
  /** Replica time paid for, from each order to its release (a drained replica after its last request). */
  replicaSeconds: number;
  gpuHours: number;
  requestsArrived: number;
  requestsServed: number;
  /** Arrived while no replica was ready and the bounded queue was full: a 503 with Retry-After. */
  requestsRefused: number;
  /** Neither served nor refused: must be 0. */
  requestsLost: number;
  /** Served with TTFT (text) or queue wait (media) within the SLO. */
  requestsWithinSlo: number;
  /** Of the arrived requests, the share served within the SLO (refused and lost count against it). */
  withinSloShare: number;
  ttftMs: Percentiles;
  waitMs: Percentiles;
  /** Times the deployment went from no replica to one ordered (scale from zero). */
  coldStarts: number;
  /** Replicas ordered in all. */
  replicaStarts: number;
  scaleUps: number;
  scaleDowns: number;
  peakReplicas: number;
  /** Every decision, in order (empty for a fixed schedule). */
  decisions: ScalingDecision[];
  /** The ones `shouldRecord` keeps. */
  recordedDecisions: ScalingDecision[];
  /** Per request, in trace order: TTFT in ms (NaN when not served). */
  ttftByRequest: Float32Array;
}

interface Replica {
  orderedAt: number;
  readyAt: number;
  ready: boolean;
  busy: number;
  draining: boolean;
  /** When its last request finishes: a replica still running at the end is paid until then. */
  busyUntil: number;
}

const OBSERVED_P95_WINDOW_MS = 60_000;
/** How long past the trace's end decisions may go on to serve requests still waiting. */
const DRAIN_LIMIT_MS = 3_600_000;

/**
 * A deployment under a request trace, request by request on a simulated clock, driven by any
 * `ScalingPolicy`. Requests wait in one FIFO queue for a free slot on a ready replica (the
 * least busy one: what the router does), get their first token after their uncached prompt's
 * prefill, and hold the slot until their output is decoded (service-model.ts). Every decision
 * interval the policy sees what production would: in flight, queued, arrivals per second, the
 * busiest engine's slot use as KV-cache use, the TTFT (or media wait) p95 of the last minute,
 * idle time, requests waiting for a first replica. A replica it orders is paid from the order
 * and serves after the start-up time (varied per start, seeded); one it removes cancels a start
 * first (the latest), else drains the least busy ready replica, which takes no new work and is
 * paid until its last request finishes. With 0 ready replicas, requests wait in a bounded queue
 * (past the bound: refused). Event-driven and deterministic: a day of requests runs in about a second.
 */
export function simulateRequests<State>(options: RequestSimulationOptions<State>): RequestSimulationResult {
  const { trace, model } = options;
  const kind = options.kind ?? 'text';
  const intervalMs = options.decisionIntervalMs ?? 5_000;
  const jitterMs = options.startupJitterMs ?? 0;
  const coldStartQueueLimit = options.coldStartQueueLimit ?? 100;
  const sloMs = kind === 'text' ? options.slo.ttftP95Ms : options.slo.queueWaitP95Ms;
  if ((options.policy === undefined) === (options.replicasAt === undefined)) {
    throw new AppError('invalid_request', 'a request simulation needs either a policy or a fixed schedule (replicasAt)', { param: 'policy' });
  }
  if (sloMs === null || !(sloMs > 0) || !(model.slots >= 1) || !(jitterMs >= 0 && jitterMs < model.startupMs)) {
    throw new AppError('invalid_request', `a request simulation needs a positive ${kind === 'text' ? 'ttftP95Ms' : 'queueWaitP95Ms'} SLO, slots of 1 or more and a start-up jitter below the start-up time`, { param: 'slo' });
  }
  const startupRandom = seededRandom(options.startupSeed ?? 1);
  // Scale to zero is the production wrapper around whatever policy is driven (it does nothing without the setting).
  const policy = options.policy && withScaleToZero(options.policy);
  const state = policy?.newState();
  const count = trace.arrivalMs.length;
  const endMs = trace.seconds * 1000;

  const ttftByRequest = new Float32Array(count).fill(Number.NaN);
  const waitByRequest = new Float32Array(count).fill(Number.NaN);
  const queue = new Int32Array(count);
  let queueHead = 0;
  let queueTail = 0;
  // Served requests' measured value (TTFT or wait) by dispatch time, for the last minute's p95.
  const measuredAt = new Float64Array(count);
  const measured = new Float32Array(count);
  let measuredHead = 0;
  let measuredTail = 0;
  const completions = new CompletionHeap();

  const replicas: Replica[] = [];
  let replicaMs = 0;
  const release = (replica: Replica, at: number) => {
    replicaMs += at - replica.orderedAt;
    replicas.splice(replicas.indexOf(replica), 1);
  };
  const order = (at: number) => {
    const startup = model.startupMs + (2 * startupRandom() - 1) * jitterMs;
    replicas.push({ orderedAt: at, readyAt: at + startup, ready: false, busy: 0, draining: false, busyUntil: 0 });
  };
  for (let index = 0; index < (options.initialReplicas ?? Math.max(1, options.minReplicas)); index++) {
    replicas.push({ orderedAt: 0, readyAt: 0, ready: true, busy: 0, draining: false, busyUntil: 0 });
  }

  const totals = { arrived: 0, served: 0, refused: 0, withinSlo: 0, coldStarts: 0, starts: 0, scaleUps: 0, scaleDowns: 0, peak: replicas.length };
  const decisions: ScalingDecision[] = [];
  const recordedDecisions: ScalingDecision[] = [];
  let inFlight = 0;
  let nextArrival = 0;
  let arrivalsSinceDecision = 0;
  let lastArrivalMs = 0; // the simulated deployment was created at 0
  let nextDecisionMs = 0;
  let now = 0;

  const dispatch = () => {
    while (queueHead < queueTail) {
      let target: Replica | null = null;
      for (const replica of replicas) {
        if (replica.ready && !replica.draining && replica.busy < model.slots && (target === null || replica.busy < target.busy)) target = replica;
      }
      if (target === null) return;
      const index = queue[queueHead++];
      const wait = now - trace.arrivalMs[index];
      const ttft = wait + prefillMs(model, trace.promptTokens[index]);
      ttftByRequest[index] = ttft;
      waitByRequest[index] = wait;
      if ((kind === 'text' ? ttft : wait) <= sloMs) totals.withinSlo++;
      measuredAt[measuredTail] = now;
      measured[measuredTail++] = kind === 'text' ? ttft : wait;
      totals.served++;
      inFlight++;
      target.busy++;
      const doneAt = now + slotHoldMs(model, trace.promptTokens[index], trace.outputTokens[index]);
      target.busyUntil = Math.max(target.busyUntil, doneAt);
      completions.push(doneAt, target);
    }
  };

  const decide = () => {
    let ready = 0;
    let current = 0;
    let busiest = 0;
    for (const replica of replicas) {
      if (replica.draining) continue;
      current++;
      if (replica.ready) {
        ready++;
        busiest = Math.max(busiest, replica.busy);
      }
    }
    while (measuredHead < measuredTail && measuredAt[measuredHead] <= now - OBSERVED_P95_WINDOW_MS) measuredHead++;
    const waiting = queueTail - queueHead;
    const observation: ScalingObservation = {
      deploymentId: 'simulated', inFlight, queued: ready > 0 ? waiting : 0, currentReplicas: current, readyReplicas: ready,
      targetConcurrency: options.targetConcurrency, minReplicas: options.minReplicas, maxReplicas: options.maxReplicas,
      autoscale: options.autoscale ?? true, capacityLimit: options.capacityLimit ?? null,
      arrivalsPerSecond: now === 0 ? 0 : arrivalsSinceDecision / (intervalMs / 1000), slo: options.slo,
      kvCacheUsage: ready > 0 ? busiest / model.slots : null,
      observedP95Ms: measuredTail > measuredHead ? percentile(measured.slice(measuredHead, measuredTail).sort(), 0.95) : null,
      waitingForReplica: ready > 0 ? 0 : waiting, idleMs: now - lastArrivalMs,
      scaleToZeroAfterMs: options.scaleToZeroAfterMs ?? null,
      ...(options.reportServiceModel === false ? {} : { serviceModel: model }),
    };
    arrivalsSinceDecision = 0;
    let desired: number;
    if (policy) {
      const decision = policy.decide(state!, observation, now);
      decisions.push(decision);
      if (shouldRecord(recordedDecisions.at(-1) ?? null, decision)) recordedDecisions.push(decision);
      if (decision.action === 'scale_up') totals.scaleUps++;
      if (decision.action === 'scale_down') totals.scaleDowns++;
      desired = decision.desiredReplicas;
    } else {
      // A schedule that ends at 0 with requests waiting gets one replica to serve them.
      desired = Math.max(now >= endMs && waiting > 0 ? 1 : 0, options.replicasAt!(now));
      if (desired > current) totals.scaleUps++;
      if (desired < current) totals.scaleDowns++;
    }
    if (desired > current && current === 0) totals.coldStarts++;
    for (let added = current; added < desired; added++, totals.starts++) order(now);
    for (let removed = current; removed > desired; removed--) removeOne();
    totals.peak = Math.max(totals.peak, desired);
  };

  const removeOne = () => {
    let starting: Replica | null = null;
    let idlest: Replica | null = null;
    for (const replica of replicas) {
      if (replica.draining) continue;
      if (!replica.ready && (starting === null || replica.readyAt > starting.readyAt)) starting = replica;
      if (replica.ready && (idlest === null || replica.busy < idlest.busy)) idlest = replica;
    }
    if (starting) release(starting, now);
    else if (idlest && idlest.busy === 0) release(idlest, now);
    else if (idlest) idlest.draining = true;
  };

  for (;;) {
    const arrivalAt = nextArrival < count ? trace.arrivalMs[nextArrival] : Number.POSITIVE_INFINITY;
    const doneAt = completions.peekAt();
    let readyAt = Number.POSITIVE_INFINITY;
    let readying: Replica | null = null;
    for (const replica of replicas) {
      if (!replica.ready && replica.readyAt < readyAt) {
        readyAt = replica.readyAt;
        readying = replica;
      }
    }
    // Past the trace's end decisions go on only while requests wait, so none is left behind.
    const decisionAt = nextDecisionMs < endMs || (queueTail > queueHead && nextDecisionMs < endMs + DRAIN_LIMIT_MS)
      ? nextDecisionMs : Number.POSITIVE_INFINITY;
    now = Math.min(arrivalAt, doneAt, readyAt, decisionAt);
    if (now === Number.POSITIVE_INFINITY) break;
    if (doneAt === now) {
      const replica = completions.pop();
      replica.busy--;
      inFlight--;
      if (replica.draining && replica.busy === 0) release(replica, now);
    } else if (readyAt === now) {
      readying!.ready = true;
    } else if (arrivalAt === now) {
      const index = nextArrival++;
      totals.arrived++;
      arrivalsSinceDecision++;
      lastArrivalMs = now;
      const anyReady = replicas.some((replica) => replica.ready && !replica.draining);
      if (!anyReady && queueTail - queueHead >= coldStartQueueLimit) totals.refused++;
      else queue[queueTail++] = index;
    } else {
      decide();
      nextDecisionMs += intervalMs;
    }
    dispatch();
  }
  for (const replica of [...replicas]) release(replica, Math.max(endMs, replica.busyUntil));

  const servedTtft = ttftByRequest.filter((value) => !Number.isNaN(value)).sort();
  const servedWait = waitByRequest.filter((value) => !Number.isNaN(value)).sort();
  const replicaSeconds = replicaMs / 1000;
  return {
    replicaSeconds, gpuHours: replicaSeconds / 3600,
    requestsArrived: totals.arrived, requestsServed: totals.served, requestsRefused: totals.refused,
    requestsLost: totals.arrived - totals.served - totals.refused,
    requestsWithinSlo: totals.withinSlo, withinSloShare: totals.arrived === 0 ? 1 : totals.withinSlo / totals.arrived,
    ttftMs: percentiles(servedTtft), waitMs: percentiles(servedWait),
    coldStarts: totals.coldStarts, replicaStarts: totals.starts, scaleUps: totals.scaleUps, scaleDowns: totals.scaleDowns,
    peakReplicas: totals.peak, decisions, recordedDecisions, ttftByRequest,
  };
}

function percentile(sorted: Float32Array, fraction: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

function percentiles(sorted: Float32Array): Percentiles {
  return {
    p50: Math.round(percentile(sorted, 0.5)), p95: Math.round(percentile(sorted, 0.95)),
    p99: Math.round(percentile(sorted, 0.99)), max: Math.round(sorted.length === 0 ? 0 : sorted[sorted.length - 1]),
  };
}

/** Requests' finishing times, earliest first, each with the replica it frees. */
class CompletionHeap {
  private readonly at: number[] = [];
  private readonly replica: Replica[] = [];

  peekAt(): number {
    return this.at.length === 0 ? Number.POSITIVE_INFINITY : this.at[0];
  }

  push(at: number, replica: Replica): void {
    let index = this.at.length;
    this.at.push(at);
    this.replica.push(replica);
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (this.at[parent] <= at) break;
      this.at[index] = this.at[parent];
      this.replica[index] = this.replica[parent];
      index = parent;
    }
    this.at[index] = at;
    this.replica[index] = replica;
  }

  pop(): Replica {
    const top = this.replica[0];
    const lastAt = this.at.pop()!;
    const lastReplica = this.replica.pop()!;
    const size = this.at.length;
    if (size > 0) {
      let index = 0;
      for (;;) {
        let child = 2 * index + 1;
        if (child >= size) break;
        if (child + 1 < size && this.at[child + 1] < this.at[child]) child++;
        if (this.at[child] >= lastAt) break;
        this.at[index] = this.at[child];
        this.replica[index] = this.replica[child];
        index = child;
      }
      this.at[index] = lastAt;
      this.replica[index] = lastReplica;
    }
    return top;
  }
}
