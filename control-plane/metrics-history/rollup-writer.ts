import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { MinuteCounts, MinuteRollups } from './minute-rollups';

/** Element-wise sum of two bucket arrays of any lengths (a missing element counts 0). */
const ADD_BUCKETS = (column: string) => `(SELECT array_agg(COALESCE(a, 0) + COALESCE(b, 0) ORDER BY i)
  FROM unnest(m.${column}, excluded.${column}) WITH ORDINALITY AS u(a, b, i))`;

/**
 * Writes this server's minute counts once per interval: one statement for all of them (the
 * rows as one JSON parameter, as the usage recorder does), each added to the row of its
 * deployment and minute that other servers write too, and one more for the minute's replica
 * sample. A failed write puts its counts back for the next one.
 *
 * Replicas come from the replica table, which every server reads alike: each server writes
 * the count it sees for the current minute and the row keeps the greatest, so N servers give
 * the same row as one. GPU cost comes from this server's metering passes, which bill each
 * replica's period once across all servers (Metering's SKIP LOCKED), so addition is exact.
 */
export class RollupWriter {
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly dataSource: DataSource,
    private readonly rollups: MinuteRollups,
    private readonly intervalMs: number,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.intervalMs);
    this.timer.unref();
  }

  /** Writes what is counted now (and the replica sample); resolves once it is written or put back. */
  flush(): Promise<void> {
    const counts = this.rollups.take();
    this.writing = this.writing.then(async () => {
      try {
        if (counts.length > 0) await this.write(counts);
      } catch (error) {
        this.logger.error({ err: error, rows: counts.length }, 'metrics history write failed; will retry');
        this.rollups.putBack(counts);
      }
      await this.sampleReplicas().catch((error) => this.logger.error({ err: error }, 'replica sample for metrics history failed'));
    });
    return this.writing;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    if (this.dataSource.isInitialized) await this.flush();
  }

  private async write(counts: readonly MinuteCounts[]): Promise<void> {
    const rows = counts.map((entry) => ({
      d: entry.deploymentId, m: entry.minute * 60_000, r: entry.requests, e: entry.errors, ti: entry.tokensIn, to: entry.tokensOut,
      c: entry.gpuCostUsd, l: Array.from(entry.latency), t: Array.from(entry.ttft), a: entry.arrivals, sr: entry.sloRequests, ws: entry.withinSlo,
    }));
    await this.dataSource.query(`
      INSERT INTO deployment_metrics_minutes AS m (deployment_id, minute, requests, errors, tokens_in, tokens_out, gpu_cost_usd, latency_buckets, ttft_buckets,
        arrivals, slo_requests, within_slo)
      SELECT d, to_timestamp(m / 1000.0), r, e, ti, "to", c, l, t, a, sr, ws
      FROM json_to_recordset($1::json) AS x(d text, m bigint, r int, e int, ti bigint, "to" bigint, c float8, l int[], t int[], a int, sr int, ws int)
      ORDER BY d, m
      ON CONFLICT (deployment_id, minute) DO UPDATE SET
        requests = m.requests + excluded.requests, errors = m.errors + excluded.errors,
        arrivals = m.arrivals + excluded.arrivals, slo_requests = m.slo_requests + excluded.slo_requests, within_slo = m.within_slo + excluded.within_slo,
        tokens_in = m.tokens_in + excluded.tokens_in, tokens_out = m.tokens_out + excluded.tokens_out,
        gpu_cost_usd = m.gpu_cost_usd + excluded.gpu_cost_usd,
        latency_buckets = ${ADD_BUCKETS('latency_buckets')}, ttft_buckets = ${ADD_BUCKETS('ttft_buckets')}`,
    [JSON.stringify(rows)]);
  }

  /** Running replicas per deployment, as the current minute's sample. */
  private async sampleReplicas(): Promise<void> {
    await this.dataSource.query(`
      INSERT INTO deployment_metrics_minutes AS m (deployment_id, minute, replicas)
      SELECT deployment_id, date_trunc('minute', statement_timestamp()), count(*)::int FROM replicas WHERE status = 'Running'
      GROUP BY deployment_id ORDER BY deployment_id
      ON CONFLICT (deployment_id, minute) DO UPDATE SET replicas = GREATEST(m.replicas, excluded.replicas)`);
  }
}
