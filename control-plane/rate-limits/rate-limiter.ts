import type { AuthenticatedKey } from '../api-keys/api-key.service';
import { AppError } from '../errors/app-error';
import { SlidingWindowLog } from './sliding-window';

export interface RateLimitDecision {
  /** Requests left in the current minute window. */
  remainingRequests: number;
  /** Seconds until the oldest request in the window leaves it. */
  resetRequestsSeconds: number;
  remainingTokens: number;
  /** Seconds until the UTC day (and the TPD budget) resets. */
  resetTokensSeconds: number;
}

interface KeyState {
  requests: SlidingWindowLog;
  day: number;
  tokensToday: number;
  loading: Promise<void> | null;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;

/**
 * RPM (exact sliding window) and TPD (tokens recorded since 00:00 UTC) per API key, in
 * process. The day's total is read once from recorded usage, then kept current by `addTokens`.
 */
export class RateLimiter {
  private readonly keys = new Map<string, KeyState>();

  constructor(
    private readonly tokensSince: (apiKeyId: string, since: Date) => Promise<number>,
    private readonly now: () => number = Date.now,
  ) {}

  /** Admits one request or throws a 429 `rate_limit_error` with Retry-After. */
  async admit(key: AuthenticatedKey): Promise<RateLimitDecision> {
    const now = this.now();
    const state = this.state(key, now);
    if (state.loading) await state.loading;
    const day = Math.floor(now / DAY_MS);
    if (state.day !== day) {
      state.day = day;
      state.tokensToday = 0;
    }
    const resetTokensMs = (day + 1) * DAY_MS - now;
    if (state.tokensToday >= key.tpdLimit) {
      throw new AppError('rate_limit_error',
        `tokens per day limit reached: ${state.tokensToday} of ${key.tpdLimit} tokens used today (UTC); resets in ${Math.ceil(resetTokensMs / 1000)} s`,
        { retryAfterSeconds: Math.ceil(resetTokensMs / 1000) });
    }
    const window = state.requests.tryAcquire(now, key.rpmLimit);
    if (!window.allowed) {
      throw new AppError('rate_limit_error',
        `requests per minute limit reached: ${key.rpmLimit} requests in the last 60 s`,
        { retryAfterSeconds: Math.max(1, Math.ceil(window.resetMs / 1000)) });
    }
    return {
      remainingRequests: window.remaining,
      resetRequestsSeconds: Math.max(0, Math.ceil(window.resetMs / 1000)),
      remainingTokens: Math.max(0, key.tpdLimit - state.tokensToday),
      resetTokensSeconds: Math.ceil(resetTokensMs / 1000),
    };
  }

  addTokens(apiKeyId: string, tokens: number): void {
    const state = this.keys.get(apiKeyId);
    if (state && tokens > 0) state.tokensToday += tokens;
  }

  private state(key: AuthenticatedKey, now: number): KeyState {
    let state = this.keys.get(key.id);
    if (!state) {
      const day = Math.floor(now / DAY_MS);
      const created: KeyState = { requests: new SlidingWindowLog(key.rpmLimit, MINUTE_MS), day, tokensToday: 0, loading: null };
      created.loading = this.tokensSince(key.id, new Date(day * DAY_MS)).then((tokens) => {
        created.tokensToday += tokens;
        created.loading = null;
      }, (error) => {
        this.keys.delete(key.id);
        throw error;
      });
      this.keys.set(key.id, created);
      state = created;
    }
    return state;
  }
}
