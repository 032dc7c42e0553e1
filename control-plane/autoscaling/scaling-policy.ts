import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicyName } from './scaling-policy-names';

export { DEPLOYMENT_SCALING_POLICIES, SCALING_POLICY_NAMES, type ScalingPolicyName, type SloTargets } from './scaling-policy-names';

export interface ScalingPolicy<State = unknown> {
  readonly name: ScalingPolicyName;
  /** A fresh memory for one deployment (a restart or a new deployment starts from this). */
  newState(): State;
  /** Pure: the replicas the deployment should have now and why; `now` never runs backwards. */
  decide(state: State, observation: ScalingObservation, now: number): ScalingDecision;
}
