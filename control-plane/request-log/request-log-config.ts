import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

const shape = {
  /** How long request log entries (and any stored bodies) are kept; older ones are deleted by a sweep. @default 30 */
  retentionDays: z.coerce.number().positive().max(3_660).default(30),
  /** How often each server writes the entries it collected (one INSERT each time). @default 1000 */
  flushIntervalMs: intField(1, 60_000).default(1_000),
  /** Stored request and answer bodies (workspaces that turn storing on) are cut to this many bytes each, and marked truncated. @default 32768 */
  bodyMaxBytes: intField(256, 1_048_576).default(32_768),
  /** How often each server deletes entries past their retention. @default 60000 */
  sweepIntervalMs: intField(10).default(60_000),
};

const names = {
  retentionDays: 'REQUEST_LOG_RETENTION_DAYS', flushIntervalMs: 'REQUEST_LOG_FLUSH_INTERVAL_MS', bodyMaxBytes: 'REQUEST_LOG_BODY_MAX_BYTES',
  sweepIntervalMs: 'REQUEST_LOG_SWEEP_INTERVAL_MS',
} as const;

export type RequestLogConfig = ReturnType<typeof loadRequestLogConfig>;

/** The settings and their variables, for the server's `--help`. */
export const REQUEST_LOG_SETTINGS = { what: 'request log', shape, names };

/** The request log of text calls (docs/observability-history.md), validated at boot. */
export const loadRequestLogConfig = envReader('request log', shape, names);
