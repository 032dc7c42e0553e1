import { z } from 'zod';
import { intField, loadEnv } from '../config/env-fields';

const shape = {
  /** Share of each shared replica's slots kept free for its owner's bursts: guests never take them (at least 1 slot). @default 0.25 */
  ownerHeadroomFraction: z.coerce.number().min(0).max(1).default(0.25),
  /** Guest requests one replica runs at once, at most. @default 16 */
  maxGuestsPerReplica: intField(0).default(16),
  /** `max_tokens` a guest request gets when it sends none: the reservation needs a bound. @default 1024 */
  defaultGuestMaxTokens: intField(1).default(1_024),
  /** `Retry-After` of a 429 when the pool has no idle slot. @default 1 */
  busyRetryAfterSeconds: intField(1).default(1),
  /** A guest request's credit hold stops counting after this (a crashed server's holds): above the 120 s request timeout. @default 180000 */
  reservationTtlMs: intField(1_000).default(180_000),
  /** How often each shared model's availability is recomputed (subscribers hear of changes). @default 1000 */
  availabilityIntervalMs: intField(10).default(1_000),
};

const names = {
  ownerHeadroomFraction: 'SHARED_OWNER_HEADROOM_FRACTION', maxGuestsPerReplica: 'SHARED_MAX_GUESTS_PER_REPLICA',
  defaultGuestMaxTokens: 'SHARED_DEFAULT_MAX_TOKENS', busyRetryAfterSeconds: 'SHARED_BUSY_RETRY_AFTER_SECONDS',
  availabilityIntervalMs: 'SHARED_AVAILABILITY_INTERVAL_MS', reservationTtlMs: 'SHARED_RESERVATION_TTL_MS',
} as const;

export type SharingConfig = ReturnType<typeof loadSharingConfig>;

export function loadSharingConfig(env: NodeJS.ProcessEnv = process.env) {
  return loadEnv('shared serving', shape, names, env);
}
