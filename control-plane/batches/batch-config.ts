import { envReader, intField } from '../config/env-fields';

const shape = {
  /** Largest file `POST /files` takes. @default 104857600 (100 MiB) */
  filesMaxBytes: intField(1_024, 1 << 30).default(100 * 1024 * 1024),
  /** Most lines (requests) in one batch's input file. @default 50000 (OpenAI's limit) */
  maxLines: intField(1, 1_000_000).default(50_000),
  /** Largest line of an input file, in bytes (the live endpoints' body limit by default). @default 4194304 */
  maxLineBytes: intField(64, 64 * 1024 * 1024).default(4 * 1024 * 1024),
  /**
   * How long a batch has to finish from its creation: what `completion_window: "24h"` means.
   * Tests shorten it to see batches expire. @default 86400000 (24 h)
   */
  completionWindowMs: intField(1_000).default(86_400_000),
  /** A running line's claim lasts this long and its server renews it every third of it; a server that stops renewing loses its lines (they run again elsewhere, at most twice in all). @default 30000 */
  lineLeaseMs: intField(200).default(30_000),
  /** A line's engine deadline (the agent fails it with a 504 after this). @default 600000 (10 min) */
  lineTimeoutMs: intField(1_000).default(600_000),
  /** How often each server looks for batch work it missed a wake-up for (new batches, free slots). @default 1000 */
  pollIntervalMs: intField(10).default(1_000),
  /** How often each server re-queues lines whose lease lapsed, expires batches past their window and finalizes ended ones (the safety net: these are also woken by events). @default 2000 */
  sweepIntervalMs: intField(10).default(2_000),
  /** A batch's progress (request counts) is announced to subscribers at most this often. @default 500 */
  progressIntervalMs: intField(10).default(500),
  /** A line that cannot run yet because its key's tokens-per-day budget cannot hold it is tried again after this. @default 5000 */
  tpdRetryMs: intField(10).default(5_000),
};

const names = {
  filesMaxBytes: 'FILES_MAX_BYTES', maxLines: 'BATCH_MAX_LINES', maxLineBytes: 'BATCH_MAX_LINE_BYTES',
  completionWindowMs: 'BATCH_COMPLETION_WINDOW_MS', lineLeaseMs: 'BATCH_LINE_LEASE_MS', lineTimeoutMs: 'BATCH_LINE_TIMEOUT_MS',
  pollIntervalMs: 'BATCH_POLL_INTERVAL_MS', sweepIntervalMs: 'BATCH_SWEEP_INTERVAL_MS', progressIntervalMs: 'BATCH_PROGRESS_INTERVAL_MS',
  tpdRetryMs: 'BATCH_TPD_RETRY_MS',
} as const;

export type BatchConfig = ReturnType<typeof loadBatchConfig>;

/** The settings and their variables, for the server's `--help`. */
export const BATCH_SETTINGS = { what: 'batches', shape, names };

/** Files and batches (the OpenAI Batch API), validated at boot. */
export const loadBatchConfig = envReader('batches', shape, names);
