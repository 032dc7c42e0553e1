import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import { LATENCY_BUCKETS, percentileOf } from './latency-buckets';

/** One step of a deployment's history: sums over its minutes, percentiles of their summed buckets. */
export interface MetricsPoint {
  /** The step's first minute. */
  readonly at: Date;
  readonly requests: number;
  readonly errors: number;
  readonly tokensIn: number;
  readonly tokensOut: number;
  /** Percentiles in ms; null in a step with no (streamed, for TTFT) live request. */
  readonly ttftP50: number | null;
  readonly ttftP95: number | null;
  readonly ttftP99: number | null;
  readonly latencyP50: number | null;
  readonly latencyP95: number | null;
  readonly latencyP99: number | null;
  /** The most replicas running in any minute of the step. */
  readonly replicas: number;
  readonly gpuCostUsd: number;
}

export interface MetricsRange {
  readonly from: Date;
  readonly to: Date;
  readonly stepMinutes: number;
}

/** A step of at most a day; at most this many points per answer (a week at 10-minute steps is 1,008). */
export const MAX_STEP_MINUTES = 1_440;
export const MAX_POINTS = 1_500;

/**
 * Reads a deployment's minute rows as points of `stepMinutes`, every step of the range present
 * (zero where nothing ran), so a chart needs no gap logic. `from` is floored and `to` ceiled to
 * whole minutes. The caller checks that the deployment is the workspace's.
 */
export class MetricsHistoryStore {
  constructor(private readonly dataSource: DataSource) {}

  async points(deploymentId: string, range: MetricsRange): Promise<MetricsPoint[]> {
    const { fromMinute, steps, stepMinutes } = checkRange(range);
    const args = [deploymentId, new Date(fromMinute * 60_000), new Date((fromMinute + steps * stepMinutes) * 60_000), stepMinutes];
    const inRange = `FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute >= $2 AND minute < $3`;
    const step = `floor(extract(epoch FROM minute - $2::timestamptz) / 60 / $4)::int`;
    const [sums, buckets]: [SumRow[], BucketRow[]] = await Promise.all([
      this.dataSource.query(`SELECT ${step} AS s, sum(requests)::float8 AS requests, sum(errors)::float8 AS errors, sum(tokens_in)::float8 AS tokens_in,
        sum(tokens_out)::float8 AS tokens_out, max(replicas) AS replicas, sum(gpu_cost_usd) AS cost ${inRange} GROUP BY 1`, args),
      this.dataSource.query(`SELECT s, kind, i, sum(v)::float8 AS v FROM (
          SELECT ${step} AS s, 'l' AS kind, u.i, u.v ${inRange.replace('FROM deployment_metrics_minutes', 'FROM deployment_metrics_minutes, unnest(latency_buckets) WITH ORDINALITY AS u(v, i)')}
          UNION ALL
          SELECT ${step} AS s, 't' AS kind, u.i, u.v ${inRange.replace('FROM deployment_metrics_minutes', 'FROM deployment_metrics_minutes, unnest(ttft_buckets) WITH ORDINALITY AS u(v, i)')}
        ) b WHERE v > 0 GROUP BY 1, 2, 3`, args),
    ]);
    const latency = Array.from({ length: steps }, () => new Float64Array(LATENCY_BUCKETS));
    const ttft = Array.from({ length: steps }, () => new Float64Array(LATENCY_BUCKETS));
    for (const row of buckets) {
      const index = Math.min(Number(row.i) - 1, LATENCY_BUCKETS - 1);
      (row.kind === 'l' ? latency : ttft)[row.s][index] += row.v;
    }
    const bySteps = new Map(sums.map((row) => [row.s, row]));
    return Array.from({ length: steps }, (_, s) => {
      const row = bySteps.get(s);
      return {
        at: new Date((fromMinute + s * stepMinutes) * 60_000),
        requests: row?.requests ?? 0, errors: row?.errors ?? 0, tokensIn: row?.tokens_in ?? 0, tokensOut: row?.tokens_out ?? 0,
        ttftP50: percentileOf(ttft[s], 0.5), ttftP95: percentileOf(ttft[s], 0.95), ttftP99: percentileOf(ttft[s], 0.99),
        latencyP50: percentileOf(latency[s], 0.5), latencyP95: percentileOf(latency[s], 0.95), latencyP99: percentileOf(latency[s], 0.99),
        replicas: row?.replicas ?? 0, gpuCostUsd: row?.cost ?? 0,
      };
    });
  }

  /** Deletes minutes older than `before`, a batch at a time; resolves with how many. */
  async deleteBefore(before: Date, limit: number): Promise<number> {
    const result = await this.dataSource.query(`DELETE FROM deployment_metrics_minutes WHERE ctid IN (
      SELECT ctid FROM deployment_metrics_minutes WHERE minute < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, [before, limit]);
    return Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0;
  }
}

interface SumRow {
  s: number;
  requests: number;
  errors: number;
  tokens_in: number;
  tokens_out: number;
  replicas: number;
  cost: number;
}

interface BucketRow {
  s: number;
  kind: 'l' | 't';
  i: string;
  v: number;
}

/** The range in whole minutes; BAD_USER_INPUT naming the field for a range that is not one. */
export function checkRange(range: MetricsRange): { fromMinute: number; steps: number; stepMinutes: number } {
  const { from, to, stepMinutes } = range;
  if (!(from instanceof Date) || Number.isNaN(from.getTime())) throw new AppError('invalid_request', 'from must be a date', { param: 'from' });
  if (!(to instanceof Date) || Number.isNaN(to.getTime())) throw new AppError('invalid_request', 'to must be a date', { param: 'to' });
  if (to <= from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
  if (!Number.isInteger(stepMinutes) || stepMinutes < 1 || stepMinutes > MAX_STEP_MINUTES) {
    throw new AppError('invalid_request', `stepMinutes must be an integer from 1 to ${MAX_STEP_MINUTES}, got ${stepMinutes}`, { param: 'stepMinutes' });
  }
  const fromMinute = Math.floor(from.getTime() / 60_000);
  const toMinute = Math.ceil(to.getTime() / 60_000);
  const steps = Math.ceil((toMinute - fromMinute) / stepMinutes);
  if (steps > MAX_POINTS) {
    throw new AppError('invalid_request', `from..to at stepMinutes ${stepMinutes} is ${steps} points; at most ${MAX_POINTS}: use a larger stepMinutes or a shorter range`, { param: 'stepMinutes' });
  }
  return { fromMinute, steps, stepMinutes };
}
