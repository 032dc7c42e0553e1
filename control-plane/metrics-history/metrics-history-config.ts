import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

const shape = {
  /** How long per-minute deployment metrics are kept; older minutes are deleted by a sweep. @default 30 */
  retentionDays: z.coerce.number().positive().max(3_660).default(30),
  /** How often each server adds the minutes it counted to the database. @default 60000 */
  flushIntervalMs: intField(10, 600_000).default(60_000),
  /** How often each server deletes minutes past their retention. @default 600000 */
  sweepIntervalMs: intField(10).default(600_000),
};

const names = {
  retentionDays: 'METRICS_HISTORY_RETENTION_DAYS', flushIntervalMs: 'METRICS_HISTORY_FLUSH_INTERVAL_MS', sweepIntervalMs: 'METRICS_HISTORY_SWEEP_INTERVAL_MS',
} as const;

export type MetricsHistoryConfig = ReturnType<typeof loadMetricsHistoryConfig>;

/** The settings and their variables, for the server's `--help`. */
export const METRICS_HISTORY_SETTINGS = { what: 'metrics history', shape, names };

/** Per-minute deployment metrics (docs/observability-history.md), validated at boot. */
export const loadMetricsHistoryConfig = envReader('metrics history', shape, names);
