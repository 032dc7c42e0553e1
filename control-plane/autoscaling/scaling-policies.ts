import type { DeploymentScalingPolicy } from '../deployments/scaling-policy-names';
import type { ScalingPolicy } from './scaling-policy';

/**
 * The policies deployments can be set to, by name, one instance each (a policy is pure: its
 * memory of a deployment is the state the capacity loop keeps per deployment). `concurrency` is
 * always there; a name without an instance runs `concurrency`, and says so (`fallback`), so a
 * deployment is never left unscaled by a policy the server does not have.
 */
export class ScalingPolicies {
  constructor(private readonly policies: { readonly concurrency: ScalingPolicy<unknown> } & Partial<Record<DeploymentScalingPolicy, ScalingPolicy<unknown>>>) {}

  /** The policy named `name`, or `concurrency` with `fallback` set when this server has none by that name. */
  get(name: DeploymentScalingPolicy): { policy: ScalingPolicy<unknown>; fallback: boolean } {
    const policy = this.policies[name];
    return policy ? { policy, fallback: false } : { policy: this.policies.concurrency, fallback: true };
  }
}
