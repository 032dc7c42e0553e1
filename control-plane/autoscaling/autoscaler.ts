import { compileAutoscalerOptions, type AutoscalerOptions, type CompiledAutoscalerOptions } from './autoscaler-options';
import { explainDecision } from './decision-explanation';
import type { ScalingDecision, ScalingReason } from './scaling-decision';
import { validateObservation, type ScalingObservation } from './scaling-observation';
import type { ScalingPolicy } from './scaling-policy';
import { advanceClock, newScalingState, smoothedSignal, stabilizedBounds, type ScalingState } from './scaling-state';

/**
 * The autoscaler's decision core: from one observation of a deployment and that deployment's
 * `ScalingState`, the replicas it should have and why. No clock, timer or I/O of its own: the
 * caller passes `now` and persists what `shouldRecord` selects, so a simulated clock drives it
 * exactly as the real one does. The rules, in order (AUTOSCALING.md has the long form):
 *
 * 1. signal = mean of in-flight + queued over `windowMs`; wanted = ceil(signal / target).
 * 2. The tolerance dead band turns that into a recommendation (`recommendWithinDeadBand`).
 * 3. Scale up to the lowest recommendation of the scale-up window, down to the highest of the
 *    scale-down window, else hold.
 * 4. Move at most one step (up: +maxScaleUpStep or ×maxScaleUpFactor; down: maxScaleDownStep).
 * 5. Keep within [max(1, min), min(max, capacityLimit)]; the floor wins a conflict. These
 *    bounds are hard and apply at once, bypassing windows and steps: lowering max or a price
 *    cap that placement can no longer meet takes effect on the next decision.
 * Autoscale off pins the count at max(1, min); the load is still observed and recorded.
 */
export class Autoscaler implements ScalingPolicy<ScalingState> {
  readonly name = 'concurrency' as const;
  readonly options: CompiledAutoscalerOptions;

  constructor(options: AutoscalerOptions = {}) {
    this.options = compileAutoscalerOptions(options);
  }

  newState(): ScalingState {
    return newScalingState();
  }

  decide(state: ScalingState, observation: ScalingObservation, now: number): ScalingDecision {
    validateObservation(observation);
    advanceClock(state, now);
    const options = this.options;
    const { currentReplicas: current, targetConcurrency: target, minReplicas, maxReplicas, autoscale } = observation;
    const capacityLimit = observation.capacityLimit ?? null;

    const signal = smoothedSignal(state, now, observation.inFlight + observation.queued, options.windowMs);
    const perReplicaLoad = signal / Math.max(1, current);
    // Exact: the samples are integers, and a quotient that is an integer is computed exactly.
    const wanted = Math.ceil(signal / target);
    const recommended = recommendWithinDeadBand(signal, current, target, options.tolerance);
    const { scaleUpTo, scaleDownTo } = stabilizedBounds(
      state, now, recommended, current, options.scaleUpStabilizationMs, options.scaleDownStabilizationMs);

    const floor = Math.max(1, minReplicas);
    const ceiling = Math.max(floor, Math.min(maxReplicas, capacityLimit ?? Number.POSITIVE_INFINITY));
    const ceilingReason: ScalingReason = capacityLimit !== null && capacityLimit < maxReplicas ? 'capped_by_price' : 'at_max';

    let desired: number;
    let reason: ScalingReason;
    if (!autoscale) {
      desired = floor;
      reason = 'autoscale_off';
    } else {
      const stabilized = scaleUpTo > current ? scaleUpTo : scaleDownTo < current ? scaleDownTo : current;
      const stepUpLimit = Math.max(current + options.maxScaleUpStep, Math.ceil(current * options.maxScaleUpFactor));
      const stepped = Math.min(stepUpLimit, Math.max(current - options.maxScaleDownStep, stabilized));
      desired = Math.min(ceiling, Math.max(floor, stepped));
      if (stepped > ceiling || (desired === current && recommended > current && current >= ceiling)) reason = ceilingReason;
      else if (stepped < floor || (desired === current && recommended < current && current <= floor)) reason = 'at_min';
      else if (stepped !== stabilized) reason = 'step_limited';
      else if (desired > current) reason = 'scale_up';
      else if (desired < current) reason = 'scale_down';
      else if (recommended > current) reason = 'stabilizing_up';
      else if (recommended < current) reason = 'stabilizing_down';
      else reason = 'within_tolerance';
    }

    const facts = {
      deploymentId: observation.deploymentId, at: now,
      action: desired > current ? 'scale_up' as const : desired < current ? 'scale_down' as const : 'hold' as const,
      reason, desiredReplicas: desired, currentReplicas: current, readyReplicas: observation.readyReplicas,
      wantedReplicas: wanted, recommendedReplicas: recommended, signal, perReplicaLoad, targetConcurrency: target,
      inFlight: observation.inFlight, queued: observation.queued, minReplicas, maxReplicas, autoscale, capacityLimit,
      // Whatever the rule, the one input this policy scales on is in-flight plus queued.
      policy: this.name, movedBy: 'in_flight',
    };
    return { ...facts, explanation: explainDecision(facts, { scaleDownTo, options }) };
  }
}

/**
 * The dead band, in replicas, with hysteresis. Up only once the load per replica is above
 * target × (1 + tolerance), and then to `wanted` (at or under target per replica). Down only
 * to the fewest replicas that keep it at or under target × (1 − tolerance); otherwise keep
 * the current count. Without the lower edge a scale-down lands at exactly full, and a rising
 * load brings the replica straight back, paying its boot again: twice on the way up the
 * 20-minute RAMP trace of the tests, and 41 turnarounds instead of 5 on their diurnal day.
 * On the benchmark's bursty day the edge costs 2-3 % more GPU-hours for 13-32 % fewer scale
 * actions and slightly fewer requests over the queueing target.
 */
export function recommendWithinDeadBand(signal: number, currentReplicas: number, target: number, tolerance: number): number {
  const wanted = Math.ceil(signal / target);
  if (currentReplicas === 0 || signal > currentReplicas * target * (1 + tolerance)) return wanted;
  // The slack keeps a load of exactly 36 at 10 × 0.9 per replica at 4, not 5: fractions such
  // as 0.9 are not exact in binary.
  return Math.min(currentReplicas, Math.ceil(signal / (target * (1 - tolerance)) - 1e-9));
}
