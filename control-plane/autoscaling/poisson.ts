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
