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
 * How much a holder's free request slots count against its residency score: llm-d's scheduler
 * adds its scorers' weighted scores (lora-load-state plus a load scorer), and so does this, at
 * equal weight. Spreading a hot adapter's jobs over its holders keeps request slots free on
 * each, so the rarer adapters homed there find room and are not spilled onto a replica that
 * must load them. Measured on bench:lora's fleet (32 adapters in host memory per replica):
 * weight 0, 14.8 loads/min and 2.1 % of requests over 1.2× the base model's TTFT p99; weight 1,
 * 5.1 and 0.7 % (bench/results/2026-11-29-issue38-lora.md).
 */
export const ADAPTER_LOAD_WEIGHT = 1;

/** A replica's request slots; a candidate that reports none is not limited by them. */
function slotsOf(candidate: AdapterCandidate): number {
  return candidate.capacity > 0 ? candidate.capacity : Number.POSITIVE_INFINITY;
}

/** The lora-load-state score plus the share of the replica's request slots free. */
function value(candidate: AdapterCandidate, fit: AdapterFit): number {
  const slots = slotsOf(candidate);
  const free = Number.isFinite(slots) ? Math.max(0, 1 - candidate.load / slots) : 1;
  return ADAPTER_FIT_SCORE[fit] + ADAPTER_LOAD_WEIGHT * free;
}

/**
 * Residency-aware placement of a job addressed to a LoRA adapter (docs/routing.md, "Adapter
 * jobs"): consistent hashing with bounded loads, holders first, a hot adapter replicated along
 * its rendezvous order. Filter → score → pick:
 *
 * 1. filter: replicas with adapter slots (`maxLoras` > 0);
 * 2. the bound of prefix-aware routing over them, `max(2, ceil((1 + loadFactor) × (total load
 *    + 1) / replicas))`, and never past a replica's request slots: a job that waits for a slot
 *    pays seconds, as a load does (bench:lora: 1.2 % of requests over the TTFT target uncapped,
 *    0.7 % capped);
 * 3. of the holders under the bound, the best by llm-d's lora-load-state score (ready 1.0,
 *    loading 0.8, host memory 0.7) plus its free request slots' share (ADAPTER_LOAD_WEIGHT);
 *    equal values go by prefix affinity (the prefix-aware order of the prompt's key), else the
 *    adapter's rendezvous order;
 * 4. every holder at the bound: a holder with a free request slot all the same. The bound
 *    balances prefix caches, where a miss costs a prefill; here crossing it costs a load from
 *    storage and an eviction that makes another adapter's next job load (bench:lora's fleet:
 *    21.2 loads/min without this step, 5.1 with it);
 * 5. otherwise the first replica of the adapter's rendezvous order under the bound: its home
 *    for a miss; for a spill (held, every holder full), the next replica of that same order, so
 *    a hot adapter grows onto a small set of replicas, the same from every server, and stays
 *    resident there instead of landing on whichever replica has a free adapter slot;
 * 6. nothing under the bound with a free slot (the fleet is full): the least loaded holder (its
 *    job waits for a slot but not for a load), else the least loaded replica (ties by replica
 *    id, the same on every server).
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
  const underBound = (candidate: C) => candidate.load < Math.min(bound, slotsOf(candidate));
  const hasSlot = (candidate: C) => candidate.load < slotsOf(candidate);
  const home = homeOrder(eligible, adapter);
  // Ties among holders: the replica the prompt's prefix should be cached on first.
  const tieOrder = key?.shared && eligible.length > 1 ? rankedOrder(eligible, key, options.homeReplicas) : home;
  const holders: Array<{ candidate: C; fit: AdapterFit; value: number }> = [];
  for (const candidate of tieOrder) {
    const held = adapterFit(candidate, adapter);
    const fit = !isResident(held) && pending(candidate.replicaId) ? 'loading' : held;
    if (isResident(fit)) holders.push({ candidate, fit, value: value(candidate, fit) });
  }
  const bestHolder = (admits: (candidate: C) => boolean) => {
    let best: (typeof holders)[number] | null = null;
    for (const holder of holders) if (admits(holder.candidate) && (best === null || holder.value > best.value)) best = holder;
    return best;
  };
  const holder = bestHolder(underBound) ?? bestHolder(hasSlot);
  if (holder) return { chosen: holder.candidate, reason: RESIDENT_REASON[holder.fit]! };
  const held = holders.length > 0;
  const loadsAt = (chosen: C): PolicyChoice<C> => ({
    chosen,
    reason: held ? 'adapter_load_fallback' : chosen === home[0] ? 'adapter_home' : adapterFit(chosen, adapter) === 'free_slot' ? 'adapter_free_slot' : 'adapter_evict',
  });
  const spill = home.find(underBound);
  if (spill) return loadsAt(spill);
  // Every replica full: wait for a slot where the adapter is, rather than for a slot and a load.
  if (held) {
    const waiting = leastLoaded(holders.map((entry) => entry.candidate))!;
    return { chosen: waiting, reason: RESIDENT_REASON[holders.find((entry) => entry.candidate === waiting)!.fit]! };
  }
  return loadsAt(leastLoaded(home)!);
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
