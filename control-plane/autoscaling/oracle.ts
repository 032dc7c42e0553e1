import { AppError } from '../errors/app-error';
import type { RequestTrace } from './load-traces';
import type { DeploymentKind } from './request-simulator';
import { prefillMs, slotHoldMs, type ServiceModel } from './service-model';

export interface OracleOptions {
  trace: RequestTrace;
  model: ServiceModel;
  /** @default 'text' (TTFT against the SLO; media: queue wait) */
  kind?: DeploymentKind;
  /** A request meets the SLO when its TTFT (text) or queue wait (media) is at most this. */
  sloMs: number;
  /** The share of all requests that must meet it, e.g. 0.99. */
  share: number;
  /** Δ: the replica count is constant within each interval of this length. */
  intervalMs: number;
  minReplicas: number;
  maxReplicas: number;
  /** Replicas already running at 0, paid from 0 but not for a start-up. */
  initialReplicas: number;
  /** Requests of this long before an interval are served first, so its slots start as busy as they would be. @default intervalMs */
  warmupMs?: number;
}

export interface OracleSchedule {
  readonly intervalMs: number;
  /** Replicas serving each interval. */
  readonly replicas: Int32Array;
  /** Replica time paid: every interval a replica exists, plus a start-up for each one added. */
  readonly replicaSeconds: number;
  readonly gpuHours: number;
  /** Replicas started (each paid one start-up). */
  readonly starts: number;
  readonly requests: number;
  /** Requests that miss the SLO under the schedule, as the oracle's model counts them … */
  readonly violations: number;
  /** … and the most the share allows. */
  readonly allowedViolations: number;
}

/**
 * The minimum-GPU-hours replica schedule that meets the SLO for `share` of the requests,
 * knowing the whole trace in advance: an exact dynamic program over a discretised timeline
 * (docs/autoscaling.md, "The oracle", states every assumption).
 *
 * - The timeline is cut into K intervals of Δ; the replica count n_k is constant in interval k,
 *   between minReplicas and maxReplicas.
 * - Cost, in replica-seconds: Δ for every replica in every interval, plus the start-up time for
 *   every replica added (it is ordered that long before the interval it first serves, which the
 *   oracle can do because it knows the future). Removing a replica is free; draining is not paid.
 * - v_k(n): the requests arriving in interval k that miss the SLO when it is served by n
 *   replicas. Computed by serving, FIFO on n × slots slots (service-model.ts), the requests that
 *   arrive in the warm-up before the interval and in the interval, as if n replicas had served
 *   both, counting only the interval's own (its leftovers are served by the same n after it
 *   ends). So v_k depends on n_k alone, which keeps the program exact; what it ignores is a
 *   backlog a smaller n_{k−1} would hand over, which is why the schedule is also replayed in
 *   the simulator. With 0 replicas every arrival of the interval misses.
 * - Minimise Σ cost subject to Σ v_k(n_k) ≤ (1 − share) × requests.
 *
 * The program runs over (k, n, violations used ≤ b): C_k[b][n] = nΔ + min over n' of
 * C_{k−1}[b − v_k(n)][n'] + S·max(0, n − n'), the min taken in O(1) per state from prefix minima
 * of C_{k−1}[b'][n'] − S·n' (for n' < n) and suffix minima of C_{k−1}[b'][n'] (n' ≥ n): O(K·N·B)
 * time. Backtracking keeps C at every √K-th interval and recomputes one segment at a time, so
 * memory is O(√K·N·B). Violations no count can avoid (a prompt whose prefill alone is over the
 * SLO) are taken out of the budget first.
 */
export function solveOracle(options: OracleOptions): OracleSchedule {
  const { trace, model, intervalMs, minReplicas, maxReplicas, initialReplicas } = options;
  validate(options);
  const intervals = Math.ceil((trace.seconds * 1000) / intervalMs);
  const width = maxReplicas + 1;
  const table = violationTable(options, intervals);
  const requests = trace.arrivalMs.length;
  let unavoidable = 0;
  for (let k = 0; k < intervals; k++) unavoidable += table.unavoidable[k];
  const allowed = Math.floor((1 - options.share) * requests + 1e-9);
  let atMax = 0;
  for (let k = 0; k < intervals; k++) atMax += table.avoidable[k * width + maxReplicas];
  if (unavoidable + atMax > allowed) {
    throw new AppError('invalid_request',
      `no schedule within ${maxReplicas} replicas meets the SLO for ${options.share * 100} % of requests: ${unavoidable + atMax} would miss, ${allowed} may`, { param: 'maxReplicas' });
  }
  const budget = allowed - unavoidable;
  const stride = budget + 1;
  const size = stride * width;
  const intervalSeconds = intervalMs / 1000;
  const startupSeconds = model.startupMs / 1000;

  const initial = new Float64Array(size).fill(Number.POSITIVE_INFINITY);
  for (let b = 0; b <= budget; b++) initial[b * width + initialReplicas] = 0;
  const prefix = new Float64Array(size);
  const suffix = new Float64Array(size);
  const step = (k: number, previous: Float64Array, next: Float64Array) => {
    for (let b = 0; b <= budget; b++) {
      const row = b * width;
      let running = Number.POSITIVE_INFINITY;
      for (let n = 0; n < width; n++) {
        running = Math.min(running, previous[row + n] - startupSeconds * n);
        prefix[row + n] = running;
      }
      running = Number.POSITIVE_INFINITY;
      for (let n = width - 1; n >= 0; n--) {
        running = Math.min(running, previous[row + n]);
        suffix[row + n] = running;
      }
    }
    const avoidable = table.avoidable;
    for (let b = 0; b <= budget; b++) {
      for (let n = 0; n < width; n++) {
        const used = avoidable[k * width + n];
        if (n < minReplicas || used > b) {
          next[b * width + n] = Number.POSITIVE_INFINITY;
          continue;
        }
        const row = (b - used) * width;
        const up = n > 0 ? startupSeconds * n + prefix[row + n - 1] : Number.POSITIVE_INFINITY;
        next[b * width + n] = Math.min(suffix[row + n], up) + intervalSeconds * n;
      }
    }
  };

  // Forward, keeping the costs entering every segment.
  const segment = Math.max(1, Math.ceil(Math.sqrt(intervals)));
  const checkpoints: Float64Array[] = [];
  let current = initial;
  let spare = new Float64Array(size);
  for (let k = 0; k < intervals; k++) {
    if (k % segment === 0) checkpoints.push(current.slice());
    step(k, current, spare);
    [current, spare] = [spare, current];
  }
  let best = Number.POSITIVE_INFINITY;
  let n = 0;
  for (let candidate = 0; candidate < width; candidate++) {
    if (current[budget * width + candidate] < best) {
      best = current[budget * width + candidate];
      n = candidate;
    }
  }

  // Backward, one segment at a time: recompute its costs, then pick each interval's predecessor.
  const replicas = new Int32Array(intervals);
  let b = budget;
  const segmentCosts = Array.from({ length: segment }, () => new Float64Array(size));
  for (let start = (checkpoints.length - 1) * segment; start >= 0; start -= segment) {
    const end = Math.min(intervals, start + segment);
    let entering = checkpoints[start / segment];
    for (let k = start; k < end; k++) {
      step(k, entering, segmentCosts[k - start]);
      entering = segmentCosts[k - start];
    }
    for (let k = end - 1; k >= start; k--) {
      replicas[k] = n;
      b -= table.avoidable[k * width + n];
      const previous = k === start ? checkpoints[start / segment] : segmentCosts[k - start - 1];
      let choice = 0;
      let choiceCost = Number.POSITIVE_INFINITY;
      for (let m = 0; m < width; m++) {
        const cost = previous[b * width + m] + startupSeconds * Math.max(0, n - m);
        if (cost < choiceCost) {
          choiceCost = cost;
          choice = m;
        }
      }
      n = choice;
    }
  }

  let starts = 0;
  let violations = unavoidable;
  for (let k = 0; k < intervals; k++) {
    starts += Math.max(0, replicas[k] - (k === 0 ? initialReplicas : replicas[k - 1]));
    violations += table.avoidable[k * width + replicas[k]];
  }
  return { intervalMs, replicas, replicaSeconds: best, gpuHours: best / 3600, starts, requests, violations, allowedViolations: allowed };
}

/**
 * The replicas to have at `now` to play the schedule in the simulator: those of the current
 * interval, or more when a later interval within `leadMs` needs more (ordered a start-up ahead).
 */
export function oracleReplicasAt(schedule: OracleSchedule, leadMs: number): (now: number) => number {
  return (now) => {
    const first = Math.floor(now / schedule.intervalMs);
    const last = Math.min(schedule.replicas.length - 1, Math.floor((now + leadMs) / schedule.intervalMs));
    let wanted = schedule.replicas[Math.min(first, schedule.replicas.length - 1)];
    for (let k = first + 1; k <= last; k++) wanted = Math.max(wanted, schedule.replicas[k]);
    return wanted;
  };
}

interface ViolationTable {
  /** v_k(n) less the unavoidable misses, at [k × (max + 1) + n]. */
  avoidable: Int32Array;
  /** Misses of interval k whatever the count (prefill alone over the SLO; every miss at n = 0 is counted in avoidable). */
  unavoidable: Int32Array;
}

/**
 * v_k(n) for every interval and count. More slots never start a FIFO request later, so v_k is
 * non-increasing in n: counts are tried upward until only the unavoidable misses remain.
 */
export function violationTable(options: OracleOptions, intervals: number): ViolationTable {
  const { trace, model, intervalMs, maxReplicas, sloMs } = options;
  const kind = options.kind ?? 'text';
  const warmupMs = options.warmupMs ?? intervalMs;
  const width = maxReplicas + 1;
  const avoidable = new Int32Array(intervals * width);
  const unavoidable = new Int32Array(intervals);
  const requests = trace.arrivalMs.length;
  const prefill = new Float64Array(requests);
  const hold = new Float64Array(requests);
  for (let index = 0; index < requests; index++) {
    prefill[index] = kind === 'text' ? prefillMs(model, trace.promptTokens[index]) : 0;
    hold[index] = slotHoldMs(model, trace.promptTokens[index], trace.outputTokens[index]);
  }
  const heap = new Float64Array(maxReplicas * model.slots);
  let warmStart = 0;
  let first = 0;
  for (let k = 0; k < intervals; k++) {
    const startMs = k * intervalMs;
    const endMs = startMs + intervalMs;
    while (warmStart < requests && trace.arrivalMs[warmStart] < startMs - warmupMs) warmStart++;
    while (first < requests && trace.arrivalMs[first] < startMs) first++;
    let last = first;
    while (last < requests && trace.arrivalMs[last] < endMs) last++;
    let base = 0;
    for (let index = first; index < last; index++) if (prefill[index] > sloMs) base++;
    unavoidable[k] = base;
    avoidable[k * width] = last - first - base;
    let n = 1;
    for (; n <= maxReplicas; n++) {
      const misses = servedMisses(heap, n * model.slots, warmStart, first, last, trace.arrivalMs, prefill, hold, sloMs);
      avoidable[k * width + n] = misses - base;
      if (misses === base) break;
    }
    // Higher counts start every request at least as early: the rest stay at 0 avoidable misses.
  }
  return { avoidable, unavoidable };
}

/** FIFO on `slots` identical slots (a min-heap of the times each frees up): misses among [first, last). */
function servedMisses(
  heap: Float64Array, slots: number, warmStart: number, first: number, last: number,
  arrivalMs: Float64Array, prefill: Float64Array, hold: Float64Array, sloMs: number,
): number {
  heap.fill(0, 0, slots);
  let misses = 0;
  for (let index = warmStart; index < last; index++) {
    const arrival = arrivalMs[index];
    const start = Math.max(arrival, heap[0]);
    if (index >= first && start - arrival + prefill[index] > sloMs) misses++;
    // Replace the root with the slot's next free time and sift it down.
    const freed = start + hold[index];
    let position = 0;
    for (;;) {
      let child = 2 * position + 1;
      if (child >= slots) break;
      if (child + 1 < slots && heap[child + 1] < heap[child]) child++;
      if (heap[child] >= freed) break;
      heap[position] = heap[child];
      position = child;
    }
    heap[position] = freed;
  }
  return misses;
}

function validate(options: OracleOptions): void {
  const rules: Array<[string, boolean, string]> = [
    ['sloMs', Number.isFinite(options.sloMs) && options.sloMs > 0, 'a duration above 0'],
    ['share', options.share > 0 && options.share <= 1, 'a fraction above 0, at most 1'],
    ['intervalMs', Number.isFinite(options.intervalMs) && options.intervalMs > 0, 'a duration above 0'],
    ['minReplicas', Number.isInteger(options.minReplicas) && options.minReplicas >= 0, 'an integer of 0 or more'],
    ['maxReplicas', Number.isInteger(options.maxReplicas) && options.maxReplicas >= Math.max(1, options.minReplicas), 'an integer of at least 1 and minReplicas'],
    ['initialReplicas', Number.isInteger(options.initialReplicas) && options.initialReplicas >= 0 && options.initialReplicas <= options.maxReplicas, 'an integer from 0 to maxReplicas'],
  ];
  for (const [name, valid, expected] of rules) {
    if (!valid) throw new AppError('invalid_request', `oracle option ${name} must be ${expected}`, { param: name });
  }
}
