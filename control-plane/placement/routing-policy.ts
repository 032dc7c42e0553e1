import type { PromptKey } from './prompt-key';

/** A deployment's routing policy (its `routingPolicy` setting). */
export const ROUTING_POLICIES = ['prefix-aware', 'least-loaded', 'round-robin'] as const;
export type RoutingPolicyName = (typeof ROUTING_POLICIES)[number];
export const DEFAULT_ROUTING_POLICY: RoutingPolicyName = 'prefix-aware';

/**
 * Why a replica was chosen, counted in `/metrics` (`routing_decisions_total{reason}`):
 * - `prefix_hit`: the replica the prompt's key ranks first, which this server has sent that
 *   application's prompts to before (its engine should hold the prefix);
 * - `prefix_cold`: the replica the key ranks first, but no request of that application went
 *   there from this server yet (the first of its prompts; or another server sent them);
 * - `load_fallback`: the first-ranked replica was loaded beyond the bound, so the next one under it;
 * - `no_prefix`: nothing any replica can hold yet (no prompt, or a first user message with no
 *   instructions): least loaded;
 * - `only_replica`: one replica takes work (or none here and the job queues): no choice to make;
 * - `least_loaded`, `round_robin`: the deployment chose that policy.
 */
export type RoutingReason = 'prefix_hit' | 'prefix_cold' | 'load_fallback' | 'no_prefix' | 'only_replica' | 'least_loaded' | 'round_robin';

/** A replica the policy may choose: on this server or a peer's (with load as its last heartbeat told). */
export interface RouteCandidate {
  readonly replicaId: string;
  /** Jobs sent to it and not finished (running in the engine or waiting for it). */
  readonly load: number;
  /** Jobs it runs at once (`maxConcurrency`); beyond that they wait in its queue. */
  readonly capacity: number;
}

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

/** Least load relative to capacity; ties to the lowest replica id (the same answer on every server). */
export function leastLoaded<C extends RouteCandidate>(candidates: readonly C[]): C | null {
  let best: C | null = null;
  for (const candidate of candidates) {
    if (!best) {
      best = candidate;
      continue;
    }
    const difference = candidate.load / candidate.capacity - best.load / best.capacity;
    if (difference < 0 || (difference === 0 && candidate.replicaId < best.replicaId)) best = candidate;
  }
  return best;
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
