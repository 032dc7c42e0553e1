import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';

/** One minute of a deployment's autoscaling, as the console charts it (issue 39). */
export interface AutoscalingPoint {
  readonly at: Date;
  /** Requests that ended in the minute (guests' and batch lines included, as in `deploymentMetrics`). */
  readonly requests: number;
  /** Requests judged against the SLO in the minute (streamed owner text by TTFT, media by queue wait), and how many met it. */
  readonly sloRequests: number;
  readonly withinSlo: number;
  /** withinSlo ÷ sloRequests; null in a minute with none judged (no request, or no SLO stated). */
  readonly attainment: number | null;
  /** Owner arrivals in the minute, per second. */
  readonly arrivalsPerSecond: number;
  /** The mean arrival rate the minute's recorded decisions forecast; null when none did. */
  readonly forecastArrivalsPerSecond: number | null;
  /** The most replicas running in the minute. */
  readonly replicas: number;
  /** GPU time billed in the minute, USD. */
  readonly gpuCost: number;
  /** What maxReplicas would have cost in the minute at the same price per replica-minute (0 before the deployment existed). */
  readonly fixedMaxCost: number;
}

/** The longest range one query reads: a week of minutes (10,080 points). */
export const MAX_AUTOSCALING_HISTORY_MS = 7 * 86_400_000;
const MINUTE_MS = 60_000;

interface MinuteRow { m: string; requests: number; arrivals: number; slo_requests: number; within_slo: number; replicas: number; cost: number }

/**
 * A deployment's autoscaling history, minute by minute, from the minute rollups
 * (deployment_metrics_minutes: arrivals, requests judged against the SLO, replicas, GPU cost)
 * and the recorded decisions (the forecast). Every minute of the range is present, zero where
 * nothing ran. Fixed-max's cost prices each minute at the range's mean price per replica-minute
 * (billed cost ÷ replica-minutes sampled), or, in a range with no replica sampled, at the
 * deployment's latest replica's hourly price: what the same replicas would have cost had all of
 * maxReplicas run. The caller checks that the deployment is the workspace's.
 */
export class AutoscalingHistoryStore {
  constructor(private readonly dataSource: DataSource) {}

  async points(deployment: { id: string; maxReplicas: number; createdAt: Date }, from: Date, to: Date): Promise<AutoscalingPoint[]> {
    const { fromMinute, minutes } = checkHistoryRange(from, to);
    const start = new Date(fromMinute * MINUTE_MS);
    const end = new Date((fromMinute + minutes) * MINUTE_MS);
    const args = [deployment.id, start, end];
    const [rows, forecasts, [totals], [latest]]: [MinuteRow[], Array<{ m: string; f: number }>, Array<{ cost: number; replica_minutes: number }>, Array<{ price: number }>] = await Promise.all([
      this.dataSource.query(`SELECT floor(extract(epoch FROM minute) / 60)::bigint AS m, requests, arrivals, slo_requests, within_slo, replicas, gpu_cost_usd AS cost
        FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute >= $2 AND minute < $3`, args),
      this.dataSource.query(`SELECT floor(extract(epoch FROM decided_at) / 60)::bigint AS m, avg(forecast_arrivals_per_second)::float8 AS f
        FROM scaling_decisions WHERE deployment_id = $1 AND decided_at >= $2 AND decided_at < $3 AND forecast_arrivals_per_second IS NOT NULL GROUP BY 1`, args),
      this.dataSource.query(`SELECT coalesce(sum(gpu_cost_usd), 0)::float8 AS cost, coalesce(sum(replicas), 0)::float8 AS replica_minutes
        FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute >= $2 AND minute < $3`, args),
      this.dataSource.query(`SELECT price_per_hour::float8 AS price FROM replicas WHERE deployment_id = $1 ORDER BY created_at DESC LIMIT 1`, [deployment.id]),
    ]);
    const perReplicaMinute = totals.replica_minutes > 0 ? totals.cost / totals.replica_minutes : (latest?.price ?? 0) / 60;
    const byMinute = new Map(rows.map((row) => [Number(row.m), row]));
    const forecastByMinute = new Map(forecasts.map((row) => [Number(row.m), row.f]));
    const createdMinute = Math.floor(deployment.createdAt.getTime() / MINUTE_MS);
    return Array.from({ length: minutes }, (_, index) => {
      const minute = fromMinute + index;
      const row = byMinute.get(minute);
      const sloRequests = row?.slo_requests ?? 0;
      const withinSlo = row?.within_slo ?? 0;
      return {
        at: new Date(minute * MINUTE_MS),
        requests: row?.requests ?? 0,
        sloRequests, withinSlo,
        attainment: sloRequests > 0 ? withinSlo / sloRequests : null,
        arrivalsPerSecond: (row?.arrivals ?? 0) / 60,
        forecastArrivalsPerSecond: forecastByMinute.get(minute) ?? null,
        replicas: row?.replicas ?? 0,
        gpuCost: row?.cost ?? 0,
        fixedMaxCost: minute >= createdMinute ? deployment.maxReplicas * perReplicaMinute : 0,
      };
    });
  }
}

/** The range in whole minutes (from floored, to ceiled); BAD_USER_INPUT naming the field for one that is not a range of at most a week. */
export function checkHistoryRange(from: Date, to: Date): { fromMinute: number; minutes: number } {
  if (!(from instanceof Date) || Number.isNaN(from.getTime())) throw new AppError('invalid_request', 'from must be a date', { param: 'from' });
  if (!(to instanceof Date) || Number.isNaN(to.getTime())) throw new AppError('invalid_request', 'to must be a date', { param: 'to' });
  if (to <= from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
  if (to.getTime() - from.getTime() > MAX_AUTOSCALING_HISTORY_MS) {
    throw new AppError('invalid_request', `from..to may span at most 7 days (10080 minutes), got ${Math.ceil((to.getTime() - from.getTime()) / MINUTE_MS)} minutes`, { param: 'to' });
  }
  const fromMinute = Math.floor(from.getTime() / MINUTE_MS);
  return { fromMinute, minutes: Math.ceil(to.getTime() / MINUTE_MS) - fromMinute };
}
