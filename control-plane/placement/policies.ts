import { LeastLoadedPolicy } from './least-loaded';
import type { PlacementPolicy, RoutingPolicyName } from './placement-policy';
import { DEFAULT_PREFIX_ROUTING, PrefixAwarePolicy, type PrefixRoutingOptions } from './prefix-aware';
import { RoundRobinPolicy } from './round-robin';

export interface PolicyOptions {
  readonly prefixRouting: PrefixRoutingOptions;
}

/**
 * The one table of routing policies, by the name a deployment's `routingPolicy` setting holds
 * (the database's CHECK and deployment.service.ts accept only these). A new policy is a
 * `PlacementPolicy` added here and to ROUTING_POLICIES.
 */
const POLICIES: { readonly [name in RoutingPolicyName]: (options: PolicyOptions) => PlacementPolicy } = {
  'prefix-aware': (options) => new PrefixAwarePolicy(options.prefixRouting),
  'least-loaded': () => new LeastLoadedPolicy(),
  'round-robin': () => new RoundRobinPolicy(),
};

/** One instance of each policy, by name: a policy keeps state (recent prefixes, turns) for the router that built it. */
export function placementPolicies(options: PolicyOptions = { prefixRouting: DEFAULT_PREFIX_ROUTING }): { readonly [name in RoutingPolicyName]: PlacementPolicy } {
  const built = {} as { [name in RoutingPolicyName]: PlacementPolicy };
  for (const name of Object.keys(POLICIES) as RoutingPolicyName[]) built[name] = POLICIES[name](options);
  return built;
}
