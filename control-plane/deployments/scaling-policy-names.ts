/**
 * The autoscaling policies by name, and the SLO a deployment states (issue 39). Declared here,
 * in core beside the deployment entity that stores them, so the entity and the settings'
 * validation need nothing from autoscaling/ (an operations folder: core may not import it), and
 * autoscaling/scaling-policy.ts re-exports them with the policy interface. What each policy
 * does: autoscaling/scaling-policy.ts.
 */
export const SCALING_POLICY_NAMES = ['concurrency', 'slo', 'queue'] as const;
export type ScalingPolicyName = (typeof SCALING_POLICY_NAMES)[number];

/** The policies a deployment may be set to (the `queue` policy exists for the benchmark). */
export const DEPLOYMENT_SCALING_POLICIES = ['concurrency', 'slo'] as const satisfies readonly ScalingPolicyName[];
export type DeploymentScalingPolicy = (typeof DEPLOYMENT_SCALING_POLICIES)[number];

/**
 * What a deployment promises its callers, each a 95th percentile in milliseconds; null = not
 * stated. Text states TTFT (and may state time per output token); media states queue wait.
 */
export interface SloTargets {
  readonly ttftP95Ms: number | null;
  readonly tpotP95Ms: number | null;
  readonly queueWaitP95Ms: number | null;
}
