import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

const shape = {
  /** A running job's server renews its claim within this; a server that stops renewing loses its jobs (`pod_crash`). @default 30000 */
  leaseMs: intField(100).default(30_000),
  /** How often each server renews leases and looks for overdue records and missed wake-ups. @default 5000 */
  sweepIntervalMs: intField(10).default(5_000),
  /** Longest wait in the queue before a record fails with `model_timeout`. @default 3600000 (1 h) */
  queueTtlMs: intField(1_000).default(3_600_000),
  /** docs/api-contract.md: image model response timeout. @default 300000 (5 min) */
  imageTimeoutMs: intField(100).default(300_000),
  /** docs/api-contract.md: video job maximum. @default 1800000 (30 min) */
  videoTimeoutMs: intField(100).default(1_800_000),
  /** docs/api-contract.md: sync image budget. @default 30000 */
  syncImageBudgetMs: intField(100).default(30_000),
  /** docs/api-contract.md: managed results are kept 10 days by default. @default 10 */
  managedRetentionDays: z.coerce.number().positive().default(10),
  /** How often the retention loop deletes expired managed outputs. @default 60000 */
  retentionIntervalMs: intField(10).default(60_000),
  /** How long an Idempotency-Key dedupes submissions. @default 24 */
  idempotencyTtlHours: z.coerce.number().positive().default(24),
  /** Queued records per deployment beyond which submissions get 429 `replica_saturated`. @default 1000 */
  maxQueuedPerDeployment: intField(1).default(1_000),
  /** Largest multipart body (image edits, videos with a reference image). @default 52428800 (50 MiB) */
  maxMediaBodyBytes: intField(1024).default(50 * 1024 * 1024),
};

const names = {
  leaseMs: 'REQUEST_LEASE_MS', sweepIntervalMs: 'REQUEST_SWEEP_INTERVAL_MS', queueTtlMs: 'REQUEST_QUEUE_TTL_MS',
  imageTimeoutMs: 'IMAGE_JOB_TIMEOUT_MS', videoTimeoutMs: 'VIDEO_JOB_TIMEOUT_MS', syncImageBudgetMs: 'SYNC_IMAGE_BUDGET_MS',
  managedRetentionDays: 'MANAGED_RETENTION_DAYS', retentionIntervalMs: 'RETENTION_INTERVAL_MS',
  idempotencyTtlHours: 'IDEMPOTENCY_TTL_HOURS', maxQueuedPerDeployment: 'MAX_QUEUED_PER_DEPLOYMENT',
  maxMediaBodyBytes: 'MAX_MEDIA_BODY_BYTES',
} as const;

export type RequestConfig = ReturnType<typeof loadRequestConfig>;

/** The settings and their variables, for the server's `--help`. */
export const REQUEST_SETTINGS = { what: 'requests', shape, names };

/** Image/video request settings, validated at boot. */
export const loadRequestConfig = envReader('requests', shape, names);
