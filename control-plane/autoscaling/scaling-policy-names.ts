// The policies' names and the SLO a deployment states, in a leaf module: the decision and the
// observation name them without importing the policy interface, which imports those two.

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
export const SCALING_POLICY_NAMES = ['concurrency', 'slo', 'queue'] as const;
export type ScalingPolicyName = (typeof SCALING_POLICY_NAMES)[number];

/** The policies a deployment may be set to (the `queue` policy exists for the benchmark). */
export const DEPLOYMENT_SCALING_POLICIES = ['concurrency', 'slo'] as const satisfies readonly ScalingPolicyName[];

/**
 * What a deployment promises its callers, each a 95th percentile in milliseconds; null = not
 * stated. Text states TTFT (and may state time per output token); media states queue wait.
 */
export interface SloTargets {
  readonly ttftP95Ms: number | null;
  readonly tpotP95Ms: number | null;
  readonly queueWaitP95Ms: number | null;
}
