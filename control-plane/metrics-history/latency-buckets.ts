/**
 * Fixed log-spaced latency buckets: bucket 0 holds [0, 1] ms, bucket i (i ≥ 1) holds
 * (2^((i-1)/4), 2^(i/4)] ms, the last one everything above. Four buckets per doubling keep a
 * percentile within ~9 % of the true value; 80 of them reach 2^(79/4) ms ≈ 15 minutes.
 *
 * Why buckets and not percentiles per row: a p95 of two servers' p95s is not the p95 of their
 * requests. Counts per bucket add up exactly, whichever server, minute or step they come from,
 * so rows are summed (per minute at write time, per step at query time) and percentiles are
 * read from the sum (docs/observability-history.md).
 */
export const LATENCY_BUCKETS = 80;

const STEPS_PER_DOUBLING = 4;

/** The bucket of a latency of `ms` milliseconds. */
export function latencyBucket(ms: number): number {
  if (!(ms > 1)) return 0;
  const index = Math.ceil(Math.log2(ms) * STEPS_PER_DOUBLING);
  return index >= LATENCY_BUCKETS ? LATENCY_BUCKETS - 1 : index;
}

/** The upper bound of bucket `index`, in ms. */
export function bucketUpperMs(index: number): number {
  return index <= 0 ? 1 : 2 ** (index / STEPS_PER_DOUBLING);
}

/**
 * The `quantile` (0..1) of the latencies counted in `counts`, or null when there are none:
 * found in the bucket holding that rank, placed within the bucket by the rank's fraction on a
 * log scale (the buckets are log-spaced, so this is their geometric interpolation).
 */
export function percentileOf(counts: ArrayLike<number>, quantile: number): number | null {
  let total = 0;
  for (let index = 0; index < counts.length; index++) total += counts[index];
  if (total === 0) return null;
  const rank = quantile * total;
  let below = 0;
  for (let index = 0; index < counts.length; index++) {
    const count = counts[index];
    if (count === 0) continue;
    if (below + count >= rank) {
      const fraction = Math.min(1, Math.max(0, (rank - below) / count));
      if (index === 0) return fraction;
      const lower = bucketUpperMs(index - 1);
      return lower * (bucketUpperMs(index) / lower) ** fraction;
    }
    below += count;
  }
  return bucketUpperMs(counts.length - 1);
}
