import { bucketUpperMs, LATENCY_BUCKETS, latencyBucket, percentileOf } from '../../control-plane/metrics-history/latency-buckets';

describe('latency buckets', () => {
  it('put each latency in the bucket whose bounds hold it', () => {
    expect(latencyBucket(0)).toBe(0);
    expect(latencyBucket(1)).toBe(0);
    expect(latencyBucket(Number.NaN)).toBe(0);
    for (const ms of [1.01, 2, 3, 17, 250, 999, 12_345, 600_000]) {
      const index = latencyBucket(ms);
      expect(ms).toBeLessThanOrEqual(bucketUpperMs(index) * (1 + 1e-12));
      expect(ms).toBeGreaterThan(bucketUpperMs(index - 1));
    }
    expect(latencyBucket(1e12)).toBe(LATENCY_BUCKETS - 1);
  });

  it('read percentiles within a bucket\'s width (~19 %) of the exact ones', () => {
    const latencies = Array.from({ length: 10_000 }, (_, index) => 5 + ((index * 7919) % 10_000) / 10); // 5..1005 ms, spread evenly
    const counts = new Array<number>(LATENCY_BUCKETS).fill(0);
    for (const ms of latencies) counts[latencyBucket(ms)]++;
    const sorted = [...latencies].sort((a, b) => a - b);
    for (const quantile of [0.5, 0.95, 0.99]) {
      const exact = sorted[Math.ceil(quantile * sorted.length) - 1];
      const read = percentileOf(counts, quantile)!;
      expect(Math.abs(read - exact) / exact).toBeLessThan(0.19);
    }
    expect(percentileOf(new Array(LATENCY_BUCKETS).fill(0), 0.5)).toBeNull();
  });

  it('merge exactly: the percentile of two servers\' summed counts is that of all their requests, not a mean of theirs', () => {
    const fast = new Array<number>(LATENCY_BUCKETS).fill(0);
    const slow = new Array<number>(LATENCY_BUCKETS).fill(0);
    for (let index = 0; index < 90; index++) fast[latencyBucket(10)]++;
    for (let index = 0; index < 10; index++) slow[latencyBucket(1_000)]++;
    const merged = fast.map((count, index) => count + slow[index]);
    // 90 requests at 10 ms and 10 at 1 s: the p95 of them all is about 1 s (the mean of the two p95s would be ~500 ms).
    expect(percentileOf(merged, 0.95)!).toBeGreaterThan(800);
    expect(percentileOf(merged, 0.5)!).toBeLessThan(12);
  });
});
