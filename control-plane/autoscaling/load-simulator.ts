import { AppError } from '../errors/app-error';
import type { Autoscaler } from './autoscaler';
import { shouldRecord } from './decision-recording';
import type { ArrivalTrace } from './load-traces';
import type { ScalingDecision } from './scaling-decision';
import { newScalingState } from './scaling-state';
import { seededRandom } from '../../common/seeded-random';
import { poisson } from './poisson';

export interface LoadSimulationOptions {
  /** Mean arrivals per second, one entry per simulated second. */
  trace: ArrivalTrace;
  autoscaler: Autoscaler;
  /** Each request holds one slot this long (rounded to whole ticks). */
  serviceTimeMs: number;
  /** Slots per ready replica: a replica serves exactly what it is sized for. */
  targetConcurrency: number;
  minReplicas: number;
  maxReplicas: number;
  autoscale: boolean;
  /** What placement can get under the price cap; null = unlimited. @default null */
  capacityLimit?: number | null;
  /** Ready replicas at the start. @default max(1, minReplicas) */
  initialReplicas?: number;
  /** From ordering a replica to its first request: a GPU booting and loading weights. @default 60000 */
  replicaStartupMs?: number;
  /** How often the platform asks the autoscaler. @default 5000 */
  decisionIntervalMs?: number;
  /** A request that waits longer than this for a slot counts as over target. @default 2000 */
  queueingTargetMs?: number;
  /** Resolution of the simulated clock; waits are measured in whole ticks. @default 1000 */
  tickMs?: number;
  /** Poisson arrivals from this seed; absent = exactly the trace's mean, spread evenly. */
  arrivalSeed?: number;
}

export interface LoadSimulationResult {
  /** Replica time paid for: ready, booting and draining replicas. */
  replicaSeconds: number;
  gpuHours: number;
  requestsArrived: number;
  /** Requests that got a slot before the trace ended. */
  requestsServed: number;
  /** Still queued when the trace ended. */
  requestsUnserved: number;
  /** Served after waiting longer than the queueing target. */
  requestsOverQueueingTarget: number;
  /** The same by the second they arrived in, to tell which part of a trace they came from. */
  overQueueingTargetBySecond: Float64Array;
  queueingDelayMs: { p50: number; p99: number; max: number };
  /** Every decision the autoscaler made, in order. */
  decisions: ScalingDecision[];
  /** The ones `shouldRecord` keeps. */
  recordedDecisions: ScalingDecision[];
  scaleUps: number;
  scaleDowns: number;
}

interface Cohort { arrivedTick: number; count: number }

/**
 * A deployment under load, tick by tick on a simulated clock, driven by the real autoscaler:
 * requests arrive, wait in one FIFO queue for a free slot (ready replicas × target
 * concurrency), hold it for the service time, and leave. Every decision interval the
 * autoscaler sees what the platform would (in flight, queued, ready + booting replicas) and its
 * decision is applied: new replicas are ready after the start-up delay; removed ones cancel a
 * boot first (newest first), else drain a ready replica, which takes no new work and is paid
 * for one more service time. The clock is the tick count, so a simulated day runs in well
 * under a second and the same inputs always give the same result.
 */
export function simulateLoad(options: LoadSimulationOptions): LoadSimulationResult {
  const tickMs = options.tickMs ?? 1_000;
  const ticks = (milliseconds: number) => Math.max(1, Math.round(milliseconds / tickMs));
  const serviceTicks = ticks(options.serviceTimeMs);
  const startupTicks = ticks(options.replicaStartupMs ?? 60_000);
  const decisionTicks = ticks(options.decisionIntervalMs ?? 5_000);
  const queueingTargetMs = options.queueingTargetMs ?? 2_000;
  if (!(options.targetConcurrency > 0) || options.trace.length === 0) {
    throw new AppError('invalid_request', 'a load simulation needs a positive targetConcurrency and a non-empty trace');
  }
  const random = options.arrivalSeed === undefined ? null : seededRandom(options.arrivalSeed);
  const state = newScalingState();
  const queue: Cohort[] = [];
  let queueHead = 0;
  let queued = 0;
  let inFlight = 0;
  const completions = new Float64Array(serviceTicks + 1);
  let ready = options.initialReplicas ?? Math.max(1, options.minReplicas);
  const booting: number[] = []; // ready-at tick of each booting replica, in launch order
  const waits = new Map<number, number>(); // wait in ticks → requests
  const overQueueingTargetBySecond = new Float64Array(options.trace.length);
  const result = {
    replicaTicks: 0, requestsArrived: 0, requestsServed: 0, requestsOverQueueingTarget: 0,
    decisions: [] as ScalingDecision[], recordedDecisions: [] as ScalingDecision[], scaleUps: 0, scaleDowns: 0,
  };
  let exactCarry = 0;
  const totalTicks = Math.ceil((options.trace.length * 1000) / tickMs);

  for (let tick = 0; tick < totalTicks; tick++) {
    inFlight -= completions[tick % completions.length];
    completions[tick % completions.length] = 0;
    while (booting.length > 0 && booting[0] <= tick) {
      booting.shift();
      ready++;
    }

    const mean = (options.trace[Math.floor((tick * tickMs) / 1000)] * tickMs) / 1000;
    let arrivals: number;
    if (random) arrivals = poisson(random, mean);
    else {
      // Carry the fractions so 1.5 req/s gives exactly 3 every 2 s; the slack absorbs the
      // binary error of adding 0.375 four times.
      exactCarry += mean;
      arrivals = Math.floor(exactCarry + 1e-9);
      exactCarry -= arrivals;
    }
    if (arrivals > 0) {
      queue.push({ arrivedTick: tick, count: arrivals });
      queued += arrivals;
      result.requestsArrived += arrivals;
    }

    let free = ready * options.targetConcurrency - inFlight;
    while (free > 0 && queued > 0) {
      const cohort = queue[queueHead];
      const started = Math.min(free, cohort.count);
      const waitTicks = tick - cohort.arrivedTick;
      waits.set(waitTicks, (waits.get(waitTicks) ?? 0) + started);
      if (waitTicks * tickMs > queueingTargetMs) {
        result.requestsOverQueueingTarget += started;
        overQueueingTargetBySecond[Math.floor((cohort.arrivedTick * tickMs) / 1000)] += started;
      }
      cohort.count -= started;
      if (cohort.count === 0) queueHead++;
      queued -= started;
      inFlight += started;
      free -= started;
      result.requestsServed += started;
      completions[(tick + serviceTicks) % completions.length] += started;
    }
    if (queueHead > 1024) {
      queue.splice(0, queueHead);
      queueHead = 0;
    }

    if (tick % decisionTicks === 0) {
      const decision = options.autoscaler.decide(state, {
        deploymentId: 'simulated', inFlight, queued, currentReplicas: ready + booting.length, readyReplicas: ready,
        targetConcurrency: options.targetConcurrency, minReplicas: options.minReplicas, maxReplicas: options.maxReplicas,
        autoscale: options.autoscale, capacityLimit: options.capacityLimit ?? null,
      }, tick * tickMs);
      result.decisions.push(decision);
      if (shouldRecord(result.recordedDecisions.at(-1) ?? null, decision)) result.recordedDecisions.push(decision);
      for (let count = ready + booting.length; count < decision.desiredReplicas; count++) booting.push(tick + startupTicks);
      for (let count = ready + booting.length; count > decision.desiredReplicas; count--) {
        if (booting.length > 0) booting.pop();
        else {
          ready--;
          result.replicaTicks += serviceTicks;
        }
      }
      if (decision.action === 'scale_up') result.scaleUps++;
      if (decision.action === 'scale_down') result.scaleDowns++;
    }
    result.replicaTicks += ready + booting.length;
  }

  const replicaSeconds = (result.replicaTicks * tickMs) / 1000;
  return {
    replicaSeconds, gpuHours: replicaSeconds / 3600,
    requestsArrived: result.requestsArrived, requestsServed: result.requestsServed, requestsUnserved: queued,
    requestsOverQueueingTarget: result.requestsOverQueueingTarget, overQueueingTargetBySecond,
    queueingDelayMs: waitPercentiles(waits, tickMs),
    decisions: result.decisions, recordedDecisions: result.recordedDecisions, scaleUps: result.scaleUps, scaleDowns: result.scaleDowns,
  };
}

function waitPercentiles(waits: Map<number, number>, tickMs: number): { p50: number; p99: number; max: number } {
  const sorted = [...waits.entries()].sort(([left], [right]) => left - right);
  const total = sorted.reduce((sum, [, count]) => sum + count, 0);
  const percentile = (fraction: number) => {
    let seen = 0;
    for (const [waitTicks, count] of sorted) {
      seen += count;
      if (seen > fraction * total) return waitTicks * tickMs;
    }
    return (sorted.at(-1)?.[0] ?? 0) * tickMs;
  };
  return { p50: percentile(0.5), p99: percentile(0.99), max: (sorted.at(-1)?.[0] ?? 0) * tickMs };
}
