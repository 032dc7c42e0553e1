import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

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
  /** How often settled guest requests are written to the ledger, all in one transaction (billing/guest-credit.ts). @default 250 */
  settleIntervalMs: intField(10).default(250),
  /** A server gives a guest workspace's credit lease back after this long with nothing in flight and no admission. @default 5000 */
  creditLeaseIdleMs: intField(0).default(5_000),
  /** A lease that must grow takes room for this many more requests like the one that needed it. @default 32 */
  creditLeaseRequests: intField(0).default(32),
  /** A guest workspace refused for want of a slot keeps its claim on the next one this long (guest-fairness.ts). @default 1000 */
  fairShareWindowMs: intField(1).default(1_000),
};

const names = {
  ownerHeadroomFraction: 'SHARED_OWNER_HEADROOM_FRACTION', maxGuestsPerReplica: 'SHARED_MAX_GUESTS_PER_REPLICA',
  defaultGuestMaxTokens: 'SHARED_DEFAULT_MAX_TOKENS', busyRetryAfterSeconds: 'SHARED_BUSY_RETRY_AFTER_SECONDS',
  availabilityIntervalMs: 'SHARED_AVAILABILITY_INTERVAL_MS', reservationTtlMs: 'SHARED_RESERVATION_TTL_MS',
  settleIntervalMs: 'SHARED_SETTLE_INTERVAL_MS', creditLeaseIdleMs: 'SHARED_CREDIT_LEASE_IDLE_MS',
  creditLeaseRequests: 'SHARED_CREDIT_LEASE_REQUESTS', fairShareWindowMs: 'SHARED_FAIR_SHARE_WINDOW_MS',
} as const;

export type SharingConfig = ReturnType<typeof loadSharingConfig>;

/** The settings and their variables, for the server's `--help`. */
export const SHARING_SETTINGS = { what: 'shared serving', shape, names };

export const loadSharingConfig = envReader('shared serving', shape, names);
