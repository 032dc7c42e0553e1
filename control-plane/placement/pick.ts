/**
 * Filter → score → pick, the one shape of every choice of a replica: of the candidates `passes`
 * lets through, the one with the highest `score` above `floor` (null: no floor, the first
 * candidate that passes is in the running whatever it scores); a tie goes to the first met,
 * counting from `start` (a rotating start spreads ties over equal replicas). Null when none
 * passes or none scores above the floor.
 *
 * Positional arguments, no options object: the dispatcher picks on every owner's request, and
 * a pick allocates nothing.
 */
export function pickBest<C>(
  candidates: readonly C[],
  score: (candidate: C) => number,
  floor: number | null = 0,
  passes?: (candidate: C) => boolean,
  start = 0,
): C | null {
  let best: C | null = null;
  let bestScore = floor ?? Number.NEGATIVE_INFINITY;
  const size = candidates.length;
  for (let offset = 0; offset < size; offset++) {
    const candidate = candidates[(start + offset) % size];
    if (passes && !passes(candidate)) continue;
    const value = score(candidate);
    if (value > bestScore || (best === null && floor === null)) {
      best = candidate;
      bestScore = value;
    }
  }
  return best;
}
