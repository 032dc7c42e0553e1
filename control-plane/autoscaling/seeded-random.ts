/**
 * Reproducible randomness for simulated load: the same seed gives the same trace and the same
 * arrivals on every machine, so a benchmark result or a failing test can be replayed exactly.
 * mulberry32: 32 bits of state, plenty for traffic shapes (not for anything secret).
 */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let mixed = state;
    mixed = Math.imul(mixed ^ (mixed >>> 15), mixed | 1);
    mixed ^= mixed + Math.imul(mixed ^ (mixed >>> 7), mixed | 61);
    return ((mixed ^ (mixed >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/**
 * A Poisson-distributed count with mean `mean`: independent arrivals. Knuth's product method
 * while it is cheap and exact; above that the normal approximation, which is within a fraction
 * of a percent there and keeps a busy simulated day at one draw per tick.
 */
export function poisson(random: () => number, mean: number): number {
  if (mean <= 0) return 0;
  if (mean < 30) {
    const limit = Math.exp(-mean);
    let count = 0;
    for (let product = random(); product > limit; product *= random()) count++;
    return count;
  }
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.max(0, Math.round(mean + Math.sqrt(mean) * normal));
}
