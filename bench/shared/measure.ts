/** The clock and the rounding bench:shared's numbers are measured with. */

/** Milliseconds on a clock both client processes share (performance.now() starts per process). */
export const now = () => performance.timeOrigin + performance.now();

export function mapValues<T, U>(record: Record<string, T>, map: (value: T) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(record).map(([key, value]) => [key, map(value)]));
}

export function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

