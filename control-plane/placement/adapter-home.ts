import { hashText } from '../../common/seeded-random';
import { score } from './prefix-aware';

/**
 * An adapter's home: the replica its first miss loads it on. Rendezvous (highest random weight)
 * hashing of (adapter name, replica id): every server ranks a deployment's replicas alike for an
 * adapter without talking, so its loads gather on one replica (then the next ones, as load
 * overflows) instead of spreading over every replica; a replica that leaves moves only the
 * adapters whose home it was, one that joins takes about 1/N of them.
 */

/** The adapter's rendezvous key: a 32-bit FNV-1a hash of its name. */
export function adapterKey(name: string): number {
  return hashText(name);
}

/** The replicas in the adapter's rendezvous order: its home first. */
export function homeOrder<C extends { readonly replicaId: string }>(candidates: readonly C[], name: string): C[] {
  const key = adapterKey(name);
  const scored = candidates.map((candidate) => ({ candidate, weight: score(key, candidate.replicaId) }));
  // Equal weights (a 32-bit collision) order by id, so every server agrees.
  scored.sort((a, b) => b.weight - a.weight || (a.candidate.replicaId < b.candidate.replicaId ? -1 : 1));
  return scored.map((entry) => entry.candidate);
}

/** The adapter's home among the candidates (null when there are none). */
export function adapterHome<C extends { readonly replicaId: string }>(candidates: readonly C[], name: string): C | null {
  const key = adapterKey(name);
  let best: C | null = null;
  let bestWeight = -1;
  for (const candidate of candidates) {
    const weight = score(key, candidate.replicaId);
    if (weight > bestWeight || (weight === bestWeight && best !== null && candidate.replicaId < best.replicaId)) {
      best = candidate;
      bestWeight = weight;
    }
  }
  return best;
}
