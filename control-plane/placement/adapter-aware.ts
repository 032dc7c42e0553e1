import { adapterFit, ADAPTER_FIT_SCORE, isResident, servesAdapters, type AdapterCandidate, type AdapterFit } from './adapter-residency';
import { homeOrder } from './adapter-home';
import { leastLoaded } from './least-loaded';
import type { PlacementPolicy, PolicyChoice, PromptSource, RoutingPolicyName, RoutingReason } from './placement-policy';
import { DEFAULT_PREFIX_ROUTING, MIN_LOAD_BOUND, rankedOrder, type PrefixRoutingOptions } from './prefix-aware';
import { promptKey, type PromptKey } from './prompt-key';
import { RecentAdapterSends } from './recent-adapter-sends';

/** Why a resident replica took the job, by how the adapter stands there. */
const RESIDENT_REASON: { readonly [fit in AdapterFit]?: RoutingReason } = { gpu: 'adapter_resident', loading: 'adapter_loading', cpu: 'adapter_cpu' };

/**
 * Residency-aware placement of a job addressed to a LoRA adapter (docs/routing.md, "Adapter
 * jobs"), filter → score → pick:
 *
 * 1. filter: replicas with adapter slots (`maxLoras` > 0);
 * 2. the bound of prefix-aware routing over them: no replica loaded to
 *    `max(2, ceil((1 + loadFactor) × (total load + 1) / replicas))` takes it while another is under;
 * 3. of those under the bound, the best that holds the adapter by llm-d's lora-load-state score
 *    (ready 1.0, loading 0.8, host memory 0.7); equal scores go by prefix affinity (the
 *    prefix-aware order of the prompt's key), else the adapter's rendezvous order;
 * 4. held nowhere under the bound (a miss): its **home**, the first replica of the adapter's
 *    rendezvous order (adapter-home.ts), while under the bound, whatever it holds: every server
 *    sends an adapter's misses to the same replica without talking, so its loads do not spread;
 * 5. the home at the bound: a free slot (0.6) before an evictable one (0.3), ties in the
 *    adapter's rendezvous order (its overflow gathers on the same next replicas).
 *
 * `pending(replica)`: the adapter was sent there moments ago and counts as loading until its
 * heartbeat tells. Null when no candidate serves adapters.
 */
export function chooseForAdapter<C extends AdapterCandidate>(
  candidates: readonly C[],
  adapter: string,
  options: PrefixRoutingOptions,
  key: PromptKey | null,
  pending: (replicaId: string) => boolean = () => false,
): PolicyChoice<C> | null {
  const eligible = candidates.filter(servesAdapters);
  if (eligible.length === 0) return null;
  let total = 1;
  for (const candidate of eligible) total += candidate.load;
  const bound = Math.max(MIN_LOAD_BOUND, Math.ceil(((1 + options.loadFactor) * total) / eligible.length));
  const fitOf = (candidate: C): AdapterFit => {
    const fit = adapterFit(candidate, adapter);
    return !isResident(fit) && pending(candidate.replicaId) ? 'loading' : fit;
  };
  const home = homeOrder(eligible, adapter);
  // Ties among holders: the replica the prompt's prefix should be cached on first.
  const tieOrder = key?.shared && eligible.length > 1 ? rankedOrder(eligible, key, options.homeReplicas) : home;
  let heldSomewhere = false;
  let best: C | null = null;
  let bestFit: AdapterFit = 'evict';
  for (const candidate of tieOrder) {
    const fit = fitOf(candidate);
    if (!isResident(fit)) continue;
    heldSomewhere = true;
    if (candidate.load >= bound) continue;
    if (best === null || ADAPTER_FIT_SCORE[fit] > ADAPTER_FIT_SCORE[bestFit]) {
      best = candidate;
      bestFit = fit;
    }
  }
  if (best) return { chosen: best, reason: RESIDENT_REASON[bestFit]! };
  if (home[0].load < bound) return { chosen: home[0], reason: heldSomewhere ? 'adapter_load_fallback' : 'adapter_home' };
  best = null;
  for (const candidate of home) {
    if (candidate.load >= bound) continue;
    const fit = fitOf(candidate);
    if (best === null || ADAPTER_FIT_SCORE[fit] > ADAPTER_FIT_SCORE[bestFit]) {
      best = candidate;
      bestFit = fit;
    }
  }
  // Unreachable with loadFactor >= 0 (the average is under the bound); a guard all the same.
  if (!best) return { chosen: leastLoaded(eligible)!, reason: 'adapter_load_fallback' };
  return { chosen: best, reason: heldSomewhere ? 'adapter_load_fallback' : bestFit === 'free_slot' ? 'adapter_free_slot' : 'adapter_evict' };
}

export interface AdapterRoutingOptions {
  readonly prefixRouting: PrefixRoutingOptions;
  /** How long a job sent with an adapter counts as its load under way on that replica (RecentAdapterSends). @default 3000 */
  readonly pendingMs: number;
}

export const DEFAULT_ADAPTER_ROUTING: AdapterRoutingOptions = { prefixRouting: DEFAULT_PREFIX_ROUTING, pendingMs: 3_000 };

/**
 * Where a job addressed to an adapter goes, under its deployment's policy: `prefix-aware` (the
 * default) places it by residency (chooseForAdapter); `round-robin` and `least-loaded` keep
 * their rule, over the replicas that serve adapters only. Keeps what this router sent where
 * (the pending loads); one instance per job router.
 */
export class AdapterPlacement {
  private readonly recent: RecentAdapterSends;

  constructor(
    private readonly policies: { readonly [name in RoutingPolicyName]: PlacementPolicy },
    private readonly options: AdapterRoutingOptions = DEFAULT_ADAPTER_ROUTING,
    private readonly now: () => number = Date.now,
  ) {
    this.recent = new RecentAdapterSends(options.pendingMs);
  }

  /** The chosen replica and why; null when no candidate serves adapters. */
  choose<C extends AdapterCandidate>(policy: RoutingPolicyName, deploymentId: string, adapter: string, prompt: PromptSource | null, candidates: readonly C[]): PolicyChoice<C> | null {
    const now = this.now();
    const choice = policy === 'prefix-aware'
      ? chooseForAdapter(candidates, adapter, this.options.prefixRouting, prompt ? promptKey(prompt.fields, prompt.tenant) : null,
        (replicaId) => this.recent.pending(replicaId, adapter, now))
      : this.byPolicy(this.policies[policy], deploymentId, prompt, candidates.filter(servesAdapters));
    if (choice?.chosen) this.recent.sent(choice.chosen.replicaId, adapter, now);
    return choice;
  }

  /** The deployment's own rule over the replicas that serve adapters; the least loaded of them when it leaves the choice to load. */
  private byPolicy<C extends AdapterCandidate>(policy: PlacementPolicy, deploymentId: string, prompt: PromptSource | null, eligible: C[]): PolicyChoice<C> | null {
    if (eligible.length === 0) return null;
    const choice = policy.choose(deploymentId, prompt ?? { fields: {}, tenant: '' }, { hasChoice: () => eligible.length > 1, candidates: () => [...eligible] });
    return choice.chosen ? choice : { chosen: leastLoaded(eligible), reason: choice.reason };
  }
}
