import type { CompiledAutoscalerOptions } from './autoscaler-options';
import type { ScalingDecision } from './scaling-decision';

interface ExplanationContext {
  /** The highest recommendation of the scale-down window. */
  readonly scaleDownTo: number;
  readonly options: CompiledAutoscalerOptions;
}

/**
 * One sentence a user can check against the recorded numbers: what happened, the rule that
 * decided it, and what the load alone asked for.
 */
export function explainDecision(decision: Omit<ScalingDecision, 'explanation'>, context: ExplanationContext): string {
  const { action, currentReplicas: current, desiredReplicas: desired, wantedReplicas: wanted, targetConcurrency: target } = decision;
  const { options } = context;
  const what = action === 'hold' ? `Holding ${replicas(current)}`
    : `Scaling ${action === 'scale_up' ? 'up' : 'down'} from ${current} to ${replicas(desired)}`;
  const load = `the load asks for ${replicas(wanted)} at ${target} per replica (${requests(decision.signal)} in flight or queued, mean of ${seconds(options.windowMs)})`;
  const floor = Math.max(1, decision.minReplicas);
  const tolerance = `${Math.round(options.tolerance * 100)} %`;
  const downWindow = seconds(options.scaleDownStabilizationMs);
  switch (decision.reason) {
    case 'scale_up':
      return `${what}: ${load}.`;
    case 'scale_down':
      return `${what}: for the last ${downWindow} the load has needed at most ${replicas(context.scaleDownTo)} (with ${tolerance} of headroom); ${load}.`;
    case 'within_tolerance':
      if (wanted === current) return `${what}: ${load}.`;
      return wanted > current
        ? `${what}: ${round(decision.perReplicaLoad)} per replica is within ${tolerance} above the target of ${target}, not worth a replica; ${load}.`
        : `${what}: ${current - 1} would run ${round(decision.signal / (current - 1))} per replica, over the ${round(target * (1 - options.tolerance))} (${tolerance} under the target of ${target}) that a scale-down must leave; ${load}.`;
    case 'stabilizing_up':
      return `${what}: more are asked for, but not yet for the whole scale-up window of ${seconds(options.scaleUpStabilizationMs)}; ${load}.`;
    case 'stabilizing_down':
      return `${what}: fewer are asked for, but scale-down waits until the load has stayed low for ${downWindow} (highest need in that window: ${context.scaleDownTo}); ${load}.`;
    case 'step_limited':
      return action === 'scale_up'
        ? `${what}, the most one decision adds (+${options.maxScaleUpStep} or ×${options.maxScaleUpFactor}); ${load}.`
        : `${what}, at most ${options.maxScaleDownStep} per decision, toward ${context.scaleDownTo > floor
          ? `${replicas(context.scaleDownTo)}, the highest need of the last ${downWindow} (with ${tolerance} of headroom)` : `the minimum of ${replicas(floor)}`}; ${load}.`;
    case 'at_max':
      return `${what}: the maximum is ${decision.maxReplicas}; ${load}.`;
    case 'capped_by_price':
      return `${what}: placement can get at most ${replicas(decision.capacityLimit ?? 0)} under the price cap right now; ${load}.`;
    case 'at_min':
      return `${what}: the minimum is ${replicas(floor)}${decision.minReplicas < 1 ? ' (never fewer than 1)' : ''}; ${load}.`;
    case 'autoscale_off':
      return `${what}: autoscale is off, so the deployment is pinned at its minimum of ${replicas(floor)}; ${load}.`;
    default:
      // The `slo` policy (explainSloDecision in slo-autoscaler.ts), the `queue` policy and scale to
      // zero (withScaleToZero) explain their own reasons.
      return `${what}: ${load}.`;
  }
}

function replicas(count: number): string {
  return `${count} ${count === 1 ? 'replica' : 'replicas'}`;
}

function requests(count: number): string {
  return `${round(count)} ${round(count) === '1' ? 'request' : 'requests'}`;
}

function seconds(milliseconds: number): string {
  return `${round(milliseconds / 1000)} s`;
}

function round(value: number): string {
  return String(Math.round(value * 10) / 10);
}
