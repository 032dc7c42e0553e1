import type { PlacementPolicy, PolicyChoice, RouteCandidate } from './placement-policy';

const LEAST_LOADED: PolicyChoice<never> = { chosen: null, reason: 'least_loaded' };

/**
 * `least-loaded`: every job to load placement (a free local slot first, else the peer with the
 * most free slots, else queued here), which knows this server's replicas' load now; it builds
 * no candidate list.
 */
export class LeastLoadedPolicy implements PlacementPolicy {
  readonly name = 'least-loaded';

  choose(): PolicyChoice<never> {
    return LEAST_LOADED;
  }
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
