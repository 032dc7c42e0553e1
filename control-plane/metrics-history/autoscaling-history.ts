import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import { MAX_POINTS, MAX_STEP_MINUTES } from './metrics-history-store';

/** One step (a minute by default) of a deployment's autoscaling, as the console charts it (issue 39). */
export interface AutoscalingPoint {
  /** The step's first minute. */
  readonly at: Date;
  /** Requests that ended in the step (guests' and batch lines included, as in `deploymentMetrics`). */
  readonly requests: number;
  /** Requests judged against the SLO in the step (streamed owner text by TTFT, media by queue wait), and how many met it. */
  readonly sloRequests: number;
  readonly withinSlo: number;
  /** withinSlo ÷ sloRequests; null in a step with none judged (no request, or no SLO stated). */
  readonly attainment: number | null;
  /** Owner arrivals in the step, per second. */
  readonly arrivalsPerSecond: number;
  /** The mean arrival rate the step's recorded decisions forecast; null when none did. */
  readonly forecastArrivalsPerSecond: number | null;
  /** The most replicas running in any minute of the step. */
  readonly replicas: number;
  /** GPU time billed in the step, USD. */
  readonly gpuCost: number;
  /** What maxReplicas would have cost in the step at the same price per replica-minute (nothing for minutes before the deployment existed). */
  readonly fixedMaxCost: number;
}

/** The longest range one query reads: a week. At most MAX_POINTS steps of it (a week at 7-minute steps is 1,440). */
export const MAX_AUTOSCALING_HISTORY_MS = 7 * 86_400_000;
const MINUTE_MS = 60_000;

interface MinuteRow { m: string; requests: number; arrivals: number; slo_requests: number; within_slo: number; replicas: number; cost: number }

/**
 * A deployment's autoscaling history in steps of whole minutes, from the minute rollups
 * (deployment_metrics_minutes: arrivals, requests judged against the SLO, replicas, GPU cost)
 * and the recorded decisions (the forecast). Every step of the range is present, zero where
 * nothing ran; a step sums its minutes (replicas: their most; rates: their mean). Fixed-max's
 * cost prices each minute at the range's mean price per replica-minute (billed cost ÷
 * replica-minutes sampled), or, in a range with no replica sampled, at the deployment's latest
 * replica's hourly price: what the same replicas would have cost had all of maxReplicas run.
 * Steps, as `deploymentMetrics` has them, keep a week's chart to at most MAX_POINTS points: a
 * week of single minutes (10,080) took 6-7 s to render through GraphQL at 20a0e48 on the 2-core test
 * machine under load (1,440 took 0.4 s). The caller checks that the deployment is the workspace's.
 */
export class AutoscalingHistoryStore {
  constructor(private readonly dataSource: DataSource) {}

  async points(deployment: { id: string; maxReplicas: number; createdAt: Date }, from: Date, to: Date, stepMinutes = 1): Promise<AutoscalingPoint[]> {
    const { fromMinute, steps } = checkHistoryRange(from, to, stepMinutes);
    const start = new Date(fromMinute * MINUTE_MS);
    const end = new Date((fromMinute + steps * stepMinutes) * MINUTE_MS);
    const args = [deployment.id, start, end];
    const [rows, forecasts, [totals], [latest]]: [MinuteRow[], Array<{ m: string; sum: number; n: number }>, Array<{ cost: number; replica_minutes: number }>, Array<{ price: number }>] = await Promise.all([
      this.dataSource.query(`SELECT floor(extract(epoch FROM minute) / 60)::bigint AS m, requests, arrivals, slo_requests, within_slo, replicas, gpu_cost_usd AS cost
        FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute >= $2 AND minute < $3`, args),
      this.dataSource.query(`SELECT floor(extract(epoch FROM decided_at) / 60)::bigint AS m, sum(forecast_arrivals_per_second)::float8 AS sum, count(*)::int AS n
        FROM scaling_decisions WHERE deployment_id = $1 AND decided_at >= $2 AND decided_at < $3 AND forecast_arrivals_per_second IS NOT NULL GROUP BY 1`, args),
      this.dataSource.query(`SELECT coalesce(sum(gpu_cost_usd), 0)::float8 AS cost, coalesce(sum(replicas), 0)::float8 AS replica_minutes
        FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute >= $2 AND minute < $3`, args),
      this.dataSource.query(`SELECT price_per_hour::float8 AS price FROM replicas WHERE deployment_id = $1 ORDER BY created_at DESC LIMIT 1`, [deployment.id]),
    ]);
    const perReplicaMinute = totals.replica_minutes > 0 ? totals.cost / totals.replica_minutes : (latest?.price ?? 0) / 60;
    const createdMinute = Math.floor(deployment.createdAt.getTime() / MINUTE_MS);
    const points = Array.from({ length: steps }, (_, index) => {
      const firstMinute = fromMinute + index * stepMinutes;
      // Minutes of the step since the deployment existed: what fixed-max would have paid for.
      const existing = Math.max(0, Math.min(stepMinutes, firstMinute + stepMinutes - Math.max(firstMinute, createdMinute)));
      return {
        at: new Date(firstMinute * MINUTE_MS), requests: 0, sloRequests: 0, withinSlo: 0, attainment: null as number | null, arrivals: 0,
        forecastSum: 0, forecasts: 0, replicas: 0, gpuCost: 0, fixedMaxCost: existing * deployment.maxReplicas * perReplicaMinute,
      };
    });
    const stepOf = (minute: string) => Math.floor((Number(minute) - fromMinute) / stepMinutes);
    for (const row of rows) {
      const point = points[stepOf(row.m)];
      point.requests += row.requests;
      point.sloRequests += row.slo_requests;
      point.withinSlo += row.within_slo;
      point.arrivals += row.arrivals;
      point.replicas = Math.max(point.replicas, row.replicas);
      point.gpuCost += row.cost;
    }
    for (const row of forecasts) {
      const point = points[stepOf(row.m)];
      point.forecastSum += row.sum;
      point.forecasts += row.n;
    }
    return points.map(({ arrivals, forecastSum, forecasts: count, ...point }) => ({
      ...point,
      attainment: point.sloRequests > 0 ? point.withinSlo / point.sloRequests : null,
      arrivalsPerSecond: arrivals / (stepMinutes * 60),
      forecastArrivalsPerSecond: count > 0 ? forecastSum / count : null,
    }));
  }
}

/**
 * The range in whole minutes (from floored, to ceiled) and its steps; BAD_USER_INPUT naming the
 * field for one that is not a range of at most a week, or a step that would make too many points.
 */
export function checkHistoryRange(from: Date, to: Date, stepMinutes: number): { fromMinute: number; steps: number } {
  if (!(from instanceof Date) || Number.isNaN(from.getTime())) throw new AppError('invalid_request', 'from must be a date', { param: 'from' });
  if (!(to instanceof Date) || Number.isNaN(to.getTime())) throw new AppError('invalid_request', 'to must be a date', { param: 'to' });
  if (to <= from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
  if (to.getTime() - from.getTime() > MAX_AUTOSCALING_HISTORY_MS) {
    throw new AppError('invalid_request', `from..to may span at most 7 days (10080 minutes), got ${Math.ceil((to.getTime() - from.getTime()) / MINUTE_MS)} minutes`, { param: 'to' });
  }
  if (!Number.isInteger(stepMinutes) || stepMinutes < 1 || stepMinutes > MAX_STEP_MINUTES) {
    throw new AppError('invalid_request', `stepMinutes must be an integer from 1 to ${MAX_STEP_MINUTES}, got ${stepMinutes}`, { param: 'stepMinutes' });
  }
  const fromMinute = Math.floor(from.getTime() / MINUTE_MS);
  const steps = Math.ceil((Math.ceil(to.getTime() / MINUTE_MS) - fromMinute) / stepMinutes);
  if (steps > MAX_POINTS) {
    throw new AppError('invalid_request', `from..to at stepMinutes ${stepMinutes} is ${steps} points; at most ${MAX_POINTS}: use a larger stepMinutes or a shorter range`, { param: 'stepMinutes' });
  }
  return { fromMinute, steps };
}
