import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { AppError } from '../errors/app-error';
import {
  DAY_MS, MINUTE_MS, msUntilNextUtcDay, requestsPerMinuteExceeded, tokensPerDayExceeded,
  type RateLimitDecision, type RateLimiter, type TokenHold, type TokensSince,
} from './rate-limit-decision';
import { SlidingWindowLog } from './sliding-window';

interface KeyState {
  requests: SlidingWindowLog;
  day: number;
  tokensToday: number;
  loading: Promise<void> | null;
}

/**
 * RPM (exact sliding window) and TPD (tokens recorded since 00:00 UTC, plus the holds of
 * requests still running) per API key, in this process: the default for one server. The day's
 * total is read once from recorded usage, then kept current by holds and their settlement. Several servers share limits through `RedisRateLimiter`.
 */
export class LocalRateLimiter implements RateLimiter {
  private readonly keys = new Map<string, KeyState>();

  constructor(
    private readonly tokensSince: TokensSince,
    private readonly now: () => number = Date.now,
    private readonly windowMs = MINUTE_MS,
  ) {}

  async admit(key: AuthenticatedKey, holdTokens = 0): Promise<RateLimitDecision> {
    const now = this.now();
    const { state, day } = await this.today(key, now);
    const resetTokensMs = msUntilNextUtcDay(now);
    if (state.tokensToday >= key.tpdLimit) throw tokensPerDayExceeded(state.tokensToday, key.tpdLimit, resetTokensMs);
    const window = state.requests.tryAcquire(now, key.rpmLimit);
    if (!window.allowed) throw requestsPerMinuteExceeded(key.rpmLimit, window.resetMs);
    const tokens = Math.max(0, Math.ceil(holdTokens));
    state.tokensToday += tokens;
    return {
      hold: { apiKeyId: key.id, day, tokens, shared: false },
      remainingRequests: window.remaining,
      resetRequestsSeconds: Math.max(0, Math.ceil(window.resetMs / 1000)),
      remainingTokens: Math.max(0, key.tpdLimit - state.tokensToday),
      resetTokensSeconds: Math.ceil(resetTokensMs / 1000),
      overLimitTokens: Math.min(tokens, Math.max(0, state.tokensToday - key.tpdLimit)),
    };
  }

  resize(hold: TokenHold, tokens: number): TokenHold {
    const lower = Math.max(0, Math.min(hold.tokens, Math.ceil(tokens)));
    this.settle(hold, lower);
    return { ...hold, tokens: lower };
  }

  refusalNow(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>): AppError | null {
    const state = this.keys.get(key.id);
    if (!state || state.loading) return null;
    const now = this.now();
    if (state.day === Math.floor(now / DAY_MS) && state.tokensToday >= key.tpdLimit) {
      return tokensPerDayExceeded(state.tokensToday, key.tpdLimit, msUntilNextUtcDay(now));
    }
    const waitMs = state.requests.waitMs(now, key.rpmLimit);
    return waitMs > 0 ? requestsPerMinuteExceeded(key.rpmLimit, waitMs) : null;
  }

  async holdWithin(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>, holdTokens: number): Promise<TokenHold | null> {
    const now = this.now();
    const { state, day } = await this.today(key, now);
    const tokens = Math.max(0, Math.ceil(holdTokens));
    if (state.tokensToday + tokens > key.tpdLimit) return null;
    state.tokensToday += tokens;
    return { apiKeyId: key.id, day, tokens, shared: false };
  }

  settle(hold: TokenHold, usedTokens: number): void {
    const state = this.keys.get(hold.apiKeyId);
    // A hold of an earlier day left with that day's budget.
    if (state && state.day === hold.day) state.tokensToday = Math.max(0, state.tokensToday + Math.max(0, usedTokens) - hold.tokens);
  }

  addTokens(apiKeyId: string, tokens: number): void {
    const state = this.keys.get(apiKeyId);
    if (state && tokens > 0) state.tokensToday += tokens;
  }

  /** The key's counters, loaded, with the day's tokens reset when `now` is a new UTC day. */
  private async today(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>, now: number) {
    const state = this.state(key, now);
    if (state.loading) await state.loading;
    const day = Math.floor(now / DAY_MS);
    if (state.day !== day) {
      state.day = day;
      state.tokensToday = 0;
    }
    return { state, day };
  }

  private state(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit'>, now: number): KeyState {
    let state = this.keys.get(key.id);
    if (!state) {
      const day = Math.floor(now / DAY_MS);
      const created: KeyState = { requests: new SlidingWindowLog(key.rpmLimit, this.windowMs), day, tokensToday: 0, loading: null };
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
