import { seededRandom } from '../common/seeded-random';

/** One request of the simulated trace: when it arrives and which adapter it names (null: the base model). */
export interface LoraRequest {
  readonly atMs: number;
  readonly adapter: string | null;
}

export interface LoraTraceOptions {
  readonly adapters: number;
  /** Zipf exponent: the k-th most popular adapter is asked for in proportion to 1 / k^s. */
  readonly zipfS: number;
  /** Poisson arrivals, requests per second. */
  readonly ratePerSecond: number;
  readonly durationMs: number;
  readonly seed: number;
}

/** The engine-facing name of the k-th adapter (`<adapter id>.r<revision>`, docs/adapters.md). */
export function adapterName(index: number): string {
  return `ad_${(0x5eed0000 + index).toString(16)}.r1`;
}

/**
 * A Poisson trace over `adapters` adapters with Zipf popularity, reproducible from its seed.
 * The popularity rank is not the name's order: names hash to homes, ranks do not line up with them.
 */
export function loraTrace(options: LoraTraceOptions): LoraRequest[] {
  const random = seededRandom(options.seed);
  const weights = Array.from({ length: options.adapters }, (_, rank) => 1 / (rank + 1) ** options.zipfS);
  const total = weights.reduce((sum, weight) => sum + weight, 0);
  const cumulative: number[] = [];
  let running = 0;
  for (const weight of weights) cumulative.push((running += weight / total));
  const names = Array.from({ length: options.adapters }, (_, index) => adapterName(index));
  for (let index = names.length - 1; index > 0; index--) {
    const other = Math.floor(random() * (index + 1));
    [names[index], names[other]] = [names[other], names[index]];
  }
  const trace: LoraRequest[] = [];
  let atMs = 0;
  for (;;) {
    atMs += (-Math.log(1 - random()) / options.ratePerSecond) * 1000;
    if (atMs >= options.durationMs) return trace;
    const draw = random();
    let low = 0;
    let high = cumulative.length - 1;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (cumulative[middle] < draw) low = middle + 1;
      else high = middle;
    }
    trace.push({ atMs, adapter: names[low] });
  }
}

/** The share of requests the `slots` most popular adapters take: the best any placement can keep resident with that many slots in all. */
export function topShare(adapters: number, zipfS: number, slots: number): number {
  let top = 0;
  let total = 0;
  for (let rank = 1; rank <= adapters; rank++) {
    total += 1 / rank ** zipfS;
    if (rank <= slots) top += 1 / rank ** zipfS;
  }
  return top / total;
}
