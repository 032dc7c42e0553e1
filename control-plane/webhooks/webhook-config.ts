import { z } from 'zod';
import { boolField, envReader, intField } from '../config/env-fields';

const schedule = z.string().regex(/^\d+(,\d+)*$/, 'must be comma-separated milliseconds, e.g. 2000,4000,8000')
  .transform((value) => value.split(',').map(Number));

const shape = {
  /** docs/api-contract.md#webhooks: each attempt times out after 5 s (a slow handler is a failure). @default 5000 */
  attemptTimeoutMs: intField(1).default(5_000),
  /** docs/api-contract.md: up to 3 attempts. @default 3 */
  maxAttempts: intField(1, 20).default(3),
  /** Delay before attempts 2, 3, …; docs/api-contract.md: 2 s, 4 s, 8 s. @default 2000,4000,8000 */
  retryScheduleMs: schedule.default([2_000, 4_000, 8_000]),
  /** docs/api-contract.md: an endpoint failing about 20 deliveries in a row is disabled. @default 20 */
  autoDisableAfter: intField(1).default(20),
  /** Attempts in flight on one server at once. @default 32 */
  maxInFlight: intField(1).default(32),
  /** After a rotation the previous signing secret keeps signing this long. @default 24 */
  rotationGraceHours: z.coerce.number().min(0).default(24),
  /** Development and tests only: accept plain-HTTP receivers on loopback. @default false */
  allowInsecureLoopback: boolField().default(false),
};

const names = {
  attemptTimeoutMs: 'WEBHOOK_ATTEMPT_TIMEOUT_MS', maxAttempts: 'WEBHOOK_MAX_ATTEMPTS', retryScheduleMs: 'WEBHOOK_RETRY_SCHEDULE_MS',
  autoDisableAfter: 'WEBHOOK_AUTO_DISABLE_AFTER', maxInFlight: 'WEBHOOK_MAX_IN_FLIGHT', rotationGraceHours: 'WEBHOOK_ROTATION_GRACE_HOURS',
  allowInsecureLoopback: 'WEBHOOK_ALLOW_INSECURE_LOOPBACK',
} as const;

export type WebhookConfig = ReturnType<typeof loadWebhookConfig>;

/** The settings and their variables, for the server's `--help`. */
export const WEBHOOK_SETTINGS = { what: 'webhooks', shape, names };

export const loadWebhookConfig = envReader('webhooks', shape, names);
