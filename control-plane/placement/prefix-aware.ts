import { leastLoaded } from './least-loaded';
import { ONLY_REPLICA, type PlacementPolicy, type PolicyChoice, type PromptSource, type ReplicaSource, type RouteCandidate } from './placement-policy';
import { promptKey, type PromptKey } from './prompt-key';
import { RecentPrefixes } from './recent-prefixes';

export interface PrefixRoutingOptions {
  /**
   * Bounded load: a replica takes the request while its load is under (1 + loadFactor) times
   * the average (counting this request); past it the next ranked one does. @default 0.25
   */
  readonly loadFactor: number;
  /** Replicas each application's prompts go to before any other (they share its cached instructions). @default 2 */
  readonly homeReplicas: number;
}

export const DEFAULT_PREFIX_ROUTING: PrefixRoutingOptions = { loadFactor: 0.25, homeReplicas: 2 };

const NO_PREFIX: PolicyChoice<never> = { chosen: null, reason: 'no_prefix' };

/**
 * `prefix-aware` (the default): a prompt that some replica may hold part of goes where its key
 * ranks (choosePrefixAware); one that nothing can hold yet goes by load alone.
 */
export class PrefixAwarePolicy implements PlacementPolicy {
  readonly name = 'prefix-aware';
  private readonly recent = new RecentPrefixes();

  constructor(private readonly options: PrefixRoutingOptions = DEFAULT_PREFIX_ROUTING) {}

  choose<C extends RouteCandidate>(deploymentId: string, prompt: PromptSource, replicas: ReplicaSource<C>): PolicyChoice<C> {
    if (!replicas.hasChoice(deploymentId)) return ONLY_REPLICA;
    const key = promptKey(prompt.fields, prompt.tenant);
    // Nothing any replica can hold yet: where it goes only matters for load, and the
    // least-loaded placement knows this server's replicas' load now (a peer's only as of its
    // last heartbeat, which a hash over every replica would trust: measured 2.9 s TTFT p90
    // against 1.3 s on a trace of unrelated prompts, bench/results/2026-11-26-routing-014887a.md).
    if (!key?.shared) return NO_PREFIX;
    const decision = choosePrefixAware(replicas.candidates(deploymentId), key, this.options);
    const seen = this.recent.sent(decision.chosen.replicaId, key.application);
    return { chosen: decision.chosen, reason: !decision.ranked ? 'load_fallback' : seen ? 'prefix_hit' : 'prefix_cold' };
  }
}

/**
 * The bound never asks a replica to refuse a second job: a conversation's replica that is
 * running one other request should still get its next turn (waiting for a cached prefix costs
 * less than evaluating it again elsewhere), even when the fleet is nearly idle.
 */
export const MIN_LOAD_BOUND = 2;

/**
 * Prefix-aware routing by bounded-load rendezvous hashing (docs/routing.md says why this and
 * not a per-server prefix tree): each application's prompts have `homeReplicas` replicas,
 * ranked by the application key and ordered among themselves by the conversation key; the
 * other replicas follow in the application key's order (an application's overflow gathers on
 * the same few replicas, whose caches then hold its instructions too). The first replica in
 * that order whose load is under the bound takes it, even when its slots are busy and the job
 * waits in its queue: an engine evaluates a cached prefix several times faster than a new one,
 * and the bound keeps that wait short. Every server computes the same order from the same key,
 * so a conversation stays on one replica whichever server receives its turns, as long as load
 * allows; replicas joining or leaving move only conversations of the applications whose home
 * replicas changed. (A prompt with nothing any replica can hold yet, `key.shared` false, is not
 * routed here: the job router places it by load alone.)
 */
export function choosePrefixAware<C extends RouteCandidate>(candidates: readonly C[], key: PromptKey, options: PrefixRoutingOptions): { chosen: C; ranked: boolean } {
  if (candidates.length === 1) return { chosen: candidates[0], ranked: true };
  const order = rankedOrder(candidates, key, options.homeReplicas);
  let total = 1;
  for (const candidate of candidates) total += candidate.load;
  const bound = Math.max(MIN_LOAD_BOUND, Math.ceil(((1 + options.loadFactor) * total) / candidates.length));
  for (let index = 0; index < order.length; index++) {
    if (order[index].load < bound) return { chosen: order[index], ranked: index === 0 };
  }
  // Unreachable with loadFactor >= 0 (the average is under the bound); a guard all the same.
  return { chosen: leastLoaded(candidates)!, ranked: false };
}

/** The application's home replicas in the conversation key's order, then the rest in the application key's. */
export function rankedOrder<C extends RouteCandidate>(candidates: readonly C[], key: PromptKey, homeReplicas: number): C[] {
  const byApplication = [...candidates].sort((a, b) => score(key.application, b.replicaId) - score(key.application, a.replicaId));
  const home = byApplication.slice(0, Math.max(1, homeReplicas));
  home.sort((a, b) => score(key.conversation, b.replicaId) - score(key.conversation, a.replicaId));
  return [...home, ...byApplication.slice(home.length)];
}

/** Rendezvous (highest random weight) score of a replica for a key: a 32-bit mix of both. */
export function score(key: number, replicaId: string): number {
  let hash = key ^ 0x9e3779b9;
  for (let index = 0; index < replicaId.length; index++) hash = Math.imul(hash ^ replicaId.charCodeAt(index), 0x01000193);
  // murmur3's finalizer: every input bit moves every output bit.
  hash ^= hash >>> 16;
  hash = Math.imul(hash, 0x85ebca6b);
  hash ^= hash >>> 13;
  hash = Math.imul(hash, 0xc2b2ae35);
  hash ^= hash >>> 16;
  return hash >>> 0;
}
