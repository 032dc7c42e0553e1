import type { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';
import { newScalingState, type ScalingState } from '../../control-plane/autoscaling/scaling-state';

/** An LLM-like deployment at rest: 1 replica of 10 slots, autoscaled within [1, 10]. */
export function observation(overrides: Partial<ScalingObservation> = {}): ScalingObservation {
  return {
    deploymentId: 'dep_test', inFlight: 0, queued: 0, currentReplicas: 1, readyReplicas: 1, targetConcurrency: 10,
    minReplicas: 1, maxReplicas: 10, autoscale: true, capacityLimit: null, ...overrides,
  };
}

/**
 * One deployment on a manual clock, acting as the platform does: it asks every `intervalMs`
 * and applies each decision at once (replicas count as current as soon as they are ordered;
 * readiness does not matter to the arithmetic).
 */
export class SimulatedDeployment {
  now = 0;
  currentReplicas: number;
  readonly state: ScalingState = newScalingState();
  readonly decisions: ScalingDecision[] = [];

  constructor(
    private readonly autoscaler: Autoscaler,
    private readonly settings: Partial<ScalingObservation> = {},
    private readonly intervalMs = 5_000,
  ) {
    this.currentReplicas = settings.currentReplicas ?? 1;
  }

  /** Decides every interval for `durationMs` with in-flight plus queued load from `loadAt(now)`. */
  run(durationMs: number, loadAt: (now: number) => number, overrides: Partial<ScalingObservation> = {}): ScalingDecision[] {
    const made: ScalingDecision[] = [];
    for (const end = this.now + durationMs; this.now < end; this.now += this.intervalMs) made.push(this.decideNow(loadAt(this.now), overrides));
    return made;
  }

  decideNow(load: number, overrides: Partial<ScalingObservation> = {}): ScalingDecision {
    const decision = this.autoscaler.decide(this.state, observation({
      ...this.settings, inFlight: load, currentReplicas: this.currentReplicas, readyReplicas: this.currentReplicas, ...overrides,
    }), this.now);
    this.currentReplicas = decision.desiredReplicas;
    this.decisions.push(decision);
    return decision;
  }
}
