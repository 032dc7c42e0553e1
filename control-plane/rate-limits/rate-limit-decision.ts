import type { AuthenticatedKey } from '../api-keys/api-key.service';
import { AppError } from '../errors/app-error';

export interface RateLimitDecision {
  /** Requests left in the current minute window. */
  remainingRequests: number;
  /** Seconds until the oldest request in the window leaves it. */
  resetRequestsSeconds: number;
  remainingTokens: number;
  /** Seconds until the UTC day (and the TPD budget) resets. */
  resetTokensSeconds: number;
  /** The tokens set aside for this request against the day's budget; settled to its real usage. */
  hold: TokenHold;
  /**
   * How far the day's used and held tokens now pass the key's TPD because of this hold (0 when
   * they fit): the pipeline lowers the request's completion bound by it (resize) so that one
   * request cannot take the day far past its limit (TPD 50 once served 64,001 tokens in one call).
   */
  overLimitTokens?: number;
}

/**
 * Tokens a request may still use, counted against its key's day budget from admission on: TPD
 * is checked on what was used *and* what admitted requests may still use, so parallel requests
 * cannot all pass a check that only sees finished ones (40 parallel `max_tokens: 500` at TPD 50
 * were all admitted). `settle` replaces the hold with the real usage, on every path a request
 * ends by (0 when it never ran).
 */
export interface TokenHold {
  readonly apiKeyId: string;
  /** UTC day number of the admission: a hold is settled on the day it was taken. */
  readonly day: number;
  readonly tokens: number;
  /** Taken in the shared store (Redis) rather than this process's. */
  readonly shared: boolean;
}

/** RPM and TPD per API key: admit a request before it runs, count its tokens after. */
export interface RateLimiter {
  /**
   * Admits one request or throws a 429 `rate_limit_error` with Retry-After. `holdTokens`: the
   * most tokens it may use (prompt bound + completion bound), held against the day's budget.
   */
  admit(key: AuthenticatedKey, holdTokens?: number): Promise<RateLimitDecision>;
  /**
   * What this server already knows refuses the key now, without counting anything or waiting:
   * its minute is full, or its day's budget is used up. The gateway asks before it reads a
   * body, so a key over its limits cannot make the server read (and hold) bodies it would
   * refuse. `admit` still decides exactly afterwards.
   */
  refusalNow(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>): AppError | null;
  /** The hold, lowered (never raised) to `tokens` before the request runs: what it gives back is free for others at once. */
  resize(hold: TokenHold, tokens: number): TokenHold;
  /** The request ended having used `usedTokens`: its hold is replaced by them. */
  settle(hold: TokenHold, usedTokens: number): void;
  /** Adds tokens used outside a hold to the key's day total. */
  addTokens(apiKeyId: string, tokens: number): void;
  /**
   * Holds `tokens` against the key's day budget only if all of them fit under its limit
   * (used + held + these ≤ TPD), counting no request against RPM: work that may wait for
   * budget (a batch line) takes it this way and never pushes the day past the limit, where a
   * live request is admitted while the day is under it. Null: not now (settle is not called).
   */
  holdWithin(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>, tokens: number): Promise<TokenHold | null>;
  close?(): Promise<void>;
  /** Why limits are not shared between servers now (Redis unreachable: each server limits in process), or null. */
  degraded?(): string | null;
}

/** Reads the tokens a key used since `since` from recorded usage (TPD survives restarts). */
export type TokensSince = (apiKeyId: string, since: Date) => Promise<number>;

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

/** Milliseconds until the next 00:00 UTC, when the TPD budget resets. */
export function msUntilNextUtcDay(now: number): number {
  return (Math.floor(now / DAY_MS) + 1) * DAY_MS - now;
}

/**
 * A 429 of a key's limits: which limit refused (RPM: `requests`, TPD: `tokens`), its value and
 * when it frees up, so the edge can send the rate-limit headers with the refusal as OpenAI does.
 */
export class RateLimitRefusal extends AppError {
  constructor(message: string, readonly limit: 'requests' | 'tokens', readonly limitValue: number, readonly resetSeconds: number) {
    super('rate_limit_error', message, { retryAfterSeconds: limit === 'requests' ? Math.max(1, resetSeconds) : resetSeconds });
  }
}

export function tokensPerDayExceeded(used: number, limit: number, resetMs: number): AppError {
  const resetSeconds = Math.ceil(resetMs / 1000);
  return new RateLimitRefusal(`tokens per day limit reached: ${used} of ${limit} tokens used today (UTC); resets in ${resetSeconds} s`, 'tokens', limit, resetSeconds);
}

export function requestsPerMinuteExceeded(limit: number, resetMs: number): AppError {
  return new RateLimitRefusal(`requests per minute limit reached: ${limit} requests in the last 60 s`, 'requests', limit, Math.max(0, Math.ceil(resetMs / 1000)));
}
