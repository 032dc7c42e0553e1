import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicyName } from '../deployments/scaling-policy-names';

/**
 * The autoscaling policies a deployment can run (issue 39). Each is a pure decision core over
 * its own per-deployment state: the capacity loop, the simulator and the benchmark drive any of
 * them the same way, so a policy measured against the oracle in `npm run bench:autoscaler` is the
 * code that scales deployments.
 * - `concurrency`: in-flight plus queued per replica against the catalog's target (autoscaler.ts,
 *   Knative KPA's signal with HPA's windows); the platform's policy before SLOs, kept for comparison.
 * - `slo`: sized for the deployment's SLO from a forecast of its arrival rate and the engines'
 *   queue and KV-cache signals (slo-autoscaler.ts).
 * - `queue`: KEDA-style, one replica more per `threshold` requests waiting on the engines
 *   (AIBrix and vLLM production-stack scale on `num_requests_waiting`); for comparison only.
 */
export { SCALING_POLICY_NAMES, DEPLOYMENT_SCALING_POLICIES } from '../deployments/scaling-policy-names';
export type { ScalingPolicyName, DeploymentScalingPolicy, SloTargets } from '../deployments/scaling-policy-names';

export interface ScalingPolicy<State = unknown> {
  readonly name: ScalingPolicyName;
  /** A fresh memory for one deployment (a restart or a new deployment starts from this). */
  newState(): State;
  /** Pure: the replicas the deployment should have now and why; `now` never runs backwards. */
  decide(state: State, observation: ScalingObservation, now: number): ScalingDecision;
}
