import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

const shape = {
  /** How long a stored response (and its chain's items) is kept; retrieve, chaining and input_items 404 after. @default 30 */
  retentionDays: z.coerce.number().positive().default(30),
  /** How often each server deletes expired responses. @default 60000 */
  sweepIntervalMs: intField(10).default(60_000),
  /** A server running a background response renews its lease this often… @default 30000 */
  backgroundLeaseMs: intField(100).default(30_000),
  /** …and looks this often for background responses nobody runs (their server died). @default 10000 */
  backgroundSweepIntervalMs: intField(10).default(10_000),
  /** Longest a background response may take from its creation, queue included; then it fails. @default 600000 */
  backgroundTimeoutMs: intField(1_000).default(600_000),
  /** Runs of one background response (each server that died mid-turn costs one); then it fails. @default 2 */
  backgroundAttempts: intField(1, 10).default(2),
  /** A background response no replica could take (busy, starting, rate-limited) is tried again after this. @default 2000 */
  backgroundRetryDelayMs: intField(10).default(2_000),
};

const names = {
  retentionDays: 'RESPONSES_RETENTION_DAYS', sweepIntervalMs: 'RESPONSES_SWEEP_INTERVAL_MS', backgroundLeaseMs: 'RESPONSES_BACKGROUND_LEASE_MS',
  backgroundSweepIntervalMs: 'RESPONSES_BACKGROUND_SWEEP_INTERVAL_MS', backgroundTimeoutMs: 'RESPONSES_BACKGROUND_TIMEOUT_MS',
  backgroundAttempts: 'RESPONSES_BACKGROUND_ATTEMPTS', backgroundRetryDelayMs: 'RESPONSES_BACKGROUND_RETRY_DELAY_MS',
} as const;

export type ResponsesConfig = ReturnType<typeof loadResponsesConfig>;

/** The settings and their variables, for the server's `--help`. */
export const RESPONSES_SETTINGS = { what: 'responses', shape, names };

/** The Responses API's state settings (docs/api-contract.md#responses-api), validated at boot. */
export const loadResponsesConfig = envReader('responses', shape, names);
