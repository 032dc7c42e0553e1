import { AppError } from '../errors/app-error';
import { Autoscaler } from './autoscaler';
import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicy } from './scaling-policy';
import { newScalingState, type ScalingState } from './scaling-state';

export interface QueueAutoscalerOptions {
  /** Requests waiting on the engines per replica (KEDA's `threshold`, as an HPA AverageValue). @default 5 */
  threshold?: number;
  /** KEDA reads the metric this often; between reads the last value stands. @default 30000 */
  pollingIntervalMs?: number;
  /** HPA's default scale-down stabilisation window. @default 300000 */
  scaleDownStabilizationMs?: number;
}

export interface QueueState {
  /** HPA's memory, kept by the concurrency policy's rules it shares. */
  hpa: ScalingState;
  polledAt: number | null;
  polledQueue: number;
}

/**
 * The `queue` policy, for comparison only: what AIBrix and vLLM production-stack deploy, KEDA
 * on the engines' `num_requests_waiting`. KEDA polls the metric every `pollingIntervalMs` and
 * hands it to an HPA with an AverageValue target of `threshold`, so the HPA wants
 * ceil(total waiting / threshold) replicas; the HPA's own defaults do the rest: a 10 % tolerance,
 * no scale-up window, a 300 s scale-down window, +4 or ×2 per step, scale-down of all excess.
 * Those rules are the `concurrency` policy's (autoscaler.ts), fed the polled queue instead of
 * in-flight plus queued. An engine with no queue reads 0, so the HPA's floor (max(1, min)) is
 * what stays once the window has passed, however busy the slots are. KEDA's scale to zero
 * (`minReplicaCount: 0`, `cooldownPeriod`) is the shared scale-to-zero rule.
 */
export class QueueAutoscaler implements ScalingPolicy<QueueState> {
  readonly name = 'queue' as const;
  readonly threshold: number;
  readonly pollingIntervalMs: number;
  private readonly hpa: Autoscaler;

  constructor(options: QueueAutoscalerOptions = {}) {
    this.threshold = options.threshold ?? 5;
    this.pollingIntervalMs = options.pollingIntervalMs ?? 30_000;
    const scaleDownStabilizationMs = options.scaleDownStabilizationMs ?? 300_000;
    if (!(Number.isFinite(this.threshold) && this.threshold > 0)) {
      throw new AppError('invalid_request', `queue autoscaler option threshold must be a number above 0, got ${this.threshold}`, { param: 'threshold' });
    }
    if (!(Number.isFinite(this.pollingIntervalMs) && this.pollingIntervalMs > 0)) {
      throw new AppError('invalid_request', `queue autoscaler option pollingIntervalMs must be a duration above 0, got ${this.pollingIntervalMs}`, { param: 'pollingIntervalMs' });
    }
    // One sample per poll, no smoothing beyond it; HPA removes all the excess at once (100 % per 15 s).
    this.hpa = new Autoscaler({ windowMs: 1, scaleDownStabilizationMs, maxScaleDownStep: Number.MAX_SAFE_INTEGER });
  }

  newState(): QueueState {
    return { hpa: newScalingState(), polledAt: null, polledQueue: 0 };
  }

  decide(state: QueueState, observation: ScalingObservation, now: number): ScalingDecision {
    if (state.polledAt === null || now - state.polledAt >= this.pollingIntervalMs) {
      state.polledAt = now;
      state.polledQueue = observation.queued;
    }
    const hpa = this.hpa.decide(state.hpa, { ...observation, inFlight: 0, queued: state.polledQueue, targetConcurrency: this.threshold }, now);
    const { action, currentReplicas: current, desiredReplicas: desired } = hpa;
    const what = action === 'hold' ? `Holding ${current}` : `Scaling ${action === 'scale_up' ? 'up' : 'down'} from ${current} to ${desired}`;
    const rule = `${state.polledQueue} requests waiting on the engines at the last poll, ${this.threshold} per replica: ceil(${state.polledQueue} / ${this.threshold}) = ${hpa.wantedReplicas}`;
    const why = hpa.reason === 'stabilizing_down' ? `fewer wanted, but HPA waits for its ${Math.round(this.hpa.options.scaleDownStabilizationMs / 1000)} s window`
      : hpa.reason === 'at_min' ? `the floor is ${Math.max(1, observation.minReplicas)}`
        : hpa.reason === 'at_max' || hpa.reason === 'capped_by_price' ? `the ceiling holds it (${hpa.reason})`
          : hpa.reason === 'step_limited' ? 'one HPA step at a time' : 'HPA follows';
    return {
      ...hpa, inFlight: observation.inFlight, queued: observation.queued, targetConcurrency: observation.targetConcurrency,
      reason: hpa.reason === 'scale_up' || hpa.reason === 'scale_down' ? 'queue_threshold' : hpa.reason,
      policy: this.name, movedBy: 'queue', explanation: `${what} replicas: ${rule}; ${why}.`,
    };
  }
}
