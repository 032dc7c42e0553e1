import type { Aggregator } from 'prom-client';

/** One label value's observations: per-bucket (not cumulative) counts, the sum and the count. */
export class HistogramSeries {
  readonly bucketCounts: Float64Array;
  sum = 0;
  count = 0;

  constructor(private readonly bounds: readonly number[]) {
    this.bucketCounts = new Float64Array(bounds.length);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let index = 0;
    while (index < bounds.length && value > bounds[index]) index++;
    if (index < bounds.length) this.bucketCounts[index]++;
    this.sum += value;
    this.count++;
  }
}

interface ExportedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
}

/**
 * A histogram whose series the request path adds to directly, exported in prom-client's
 * collector shape (`get()` → name, type, values with `metricName`) so it sits in the same
 * Registry as everything else. prom-client's own `Histogram.observe` re-hashes and
 * re-validates the label object on every call, cached child or not: ~0.5 µs each, two per
 * request, against a gateway budget of ~150 µs (docs/performance.md#count-every-microsecond-on-the-per-request-path).
 * Its labels are fixed at construction (`route`; `deployment` and `model`); callers look a
 * series up once per label tuple and keep it.
 */
export class AccumulatedHistogram {
  readonly type = 'histogram';
  readonly aggregator: Aggregator = 'sum';
  private readonly bySeries = new Map<string, { labels: Record<string, string>; series: HistogramSeries }>();
  /** As prom-client's metrics have it (tests read each metric's labels from the registry). */
  readonly labelNames: readonly string[];

  constructor(readonly name: string, readonly help: string, labelNames: string | readonly string[], private readonly bounds: readonly number[]) {
    this.labelNames = typeof labelNames === 'string' ? [labelNames] : labelNames;
  }

  /** The series of one tuple of label values, in the constructor's label order; callers keep it and call `observe` on it. */
  series(...labelValues: string[]): HistogramSeries {
    // Built once per label tuple (the caller caches the series): not on the per-request path.
    const key = labelValues.join('\u0000');
    let entry = this.bySeries.get(key);
    if (!entry) {
      const labels = Object.fromEntries(this.labelNames.map((name, index) => [name, labelValues[index] ?? '']));
      entry = { labels, series: new HistogramSeries(this.bounds) };
      this.bySeries.set(key, entry);
    }
    return entry.series;
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: Aggregator; values: ExportedValue[] }> {
    const values: ExportedValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const { labels, series } of this.bySeries.values()) {
      let cumulative = 0;
      for (let index = 0; index < this.bounds.length; index++) {
        cumulative += series.bucketCounts[index];
        values.push({ labels: { ...labels, le: this.bounds[index] }, value: cumulative, metricName: bucket });
      }
      values.push({ labels: { ...labels, le: '+Inf' }, value: series.count, metricName: bucket });
      values.push({ labels, value: series.sum, metricName: `${this.name}_sum` });
      values.push({ labels, value: series.count, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** Registry.resetMetrics(): zeroes in place, so series already handed out stay exported. */
  reset(): void {
    for (const { series } of this.bySeries.values()) {
      series.bucketCounts.fill(0);
      series.sum = 0;
      series.count = 0;
    }
  }
}
