import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { AuthenticatedKey } from '../api-keys/api-key.service';
import type { AppError } from '../errors/app-error';
import {
  DAY_MS, MINUTE_MS, msUntilNextUtcDay, requestsPerMinuteExceeded, tokensPerDayExceeded,
  type RateLimitDecision, type RateLimiter, type TokenHold, type TokensSince,
} from './rate-limit-decision';

/**
 * One round trip decides both limits atomically. KEYS[1]: the key's request log (a sorted
 * set of admission times), KEYS[2]: the key's token counter for the UTC day. Time comes from
 * Redis (TIME), so servers with skewed clocks still share one exact window.
 * ARGV[5]: tokens held for the request, added to the day counter when it is admitted.
 * Returns {-1} when the day counter is not loaded yet; {0, 1, used} over TPD;
 * {0, 2, resetMs} over RPM; {1, remaining, resetMs, used} admitted (used includes the hold).
 */
const ADMIT_SCRIPT = `
local used = redis.call('GET', KEYS[2])
if not used then return {-1} end
used = tonumber(used)
if used >= tonumber(ARGV[2]) then return {0, 1, used} end
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local window = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local limit = tonumber(ARGV[1])
if count >= limit then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, 2, tonumber(oldest[2]) + window - now}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], window)
local hold = tonumber(ARGV[5])
if hold > 0 then used = redis.call('INCRBY', KEYS[2], hold) end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {1, limit - count - 1, tonumber(oldest[2]) + window - now, used}
`;

/** Adds tokens (a settlement's difference may be negative) only to a loaded counter: an absent one is loaded from recorded usage instead. */
const ADD_TOKENS_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end
return -1
`;

/**
 * Holds ARGV[2] tokens on the day counter KEYS[1] only if they fit under the limit ARGV[1];
 * counts no request. {-1} when the counter is not loaded yet, {0, used} when they do not fit,
 * {1, used} when held.
 */
const HOLD_WITHIN_SCRIPT = `
local used = redis.call('GET', KEYS[1])
if not used then return {-1} end
used = tonumber(used)
local hold = tonumber(ARGV[2])
if used + hold > tonumber(ARGV[1]) then return {0, used} end
if hold > 0 then used = redis.call('INCRBY', KEYS[1], hold) end
return {1, used}
`;

interface LimiterCommands {
  admitRequest(requestLog: string, dayTokens: string, rpmLimit: number, tpdLimit: number, windowMs: number, member: string, holdTokens: number): Promise<number[]>;
  addDayTokens(dayTokens: string, tokens: number): Promise<number>;
  holdDayTokens(dayTokens: string, tpdLimit: number, holdTokens: number): Promise<number[]>;
}

export interface RedisRateLimiterOptions {
  /** Prefix of every key this limiter writes. @default "rl:" */
  keyPrefix?: string;
  /** RPM window; tests shorten it. @default 60000 */
  windowMs?: number;
  /**
   * This server's clock in milliseconds: which day's counter a call uses, and how long a refusal
   * is remembered (the RPM window itself runs on Redis's clock). @default Date.now
   */
  now?: () => number;
}

/**
 * RPM and TPD shared by every server instance through Redis: a burst spread over several
 * gateways is limited exactly as if it hit one. When Redis cannot be reached, each server
 * falls back to its own in-process limiter (logged), so an outage degrades limits, not traffic.
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly commands: LimiterCommands;
  private readonly memberPrefix = randomBytes(6).toString('hex');
  private sequence = 0;
  private readonly loading = new Map<string, Promise<void>>();
  private readonly keyPrefix: string;
  private readonly windowMs: number;
  private lastWarningAt = 0;
  /** Set while Redis fails: requests are limited by this server alone (the fallback). */
  private fallingBack = false;
  /** Keys Redis refused lately, until when (this.now()) and why: refusalNow answers from it without a round trip. */
  private readonly refusedUntil = new Map<string, { until: number; error: () => AppError }>();
  private readonly now: () => number;

  constructor(
    private readonly redis: Redis,
    private readonly tokensSince: TokensSince,
    private readonly fallback: RateLimiter,
    private readonly logger: Logger,
    options: RedisRateLimiterOptions = {},
  ) {
    this.keyPrefix = options.keyPrefix ?? 'rl:';
    this.windowMs = options.windowMs ?? MINUTE_MS;
    this.now = options.now ?? Date.now;
    redis.defineCommand('admitRequest', { numberOfKeys: 2, lua: ADMIT_SCRIPT });
    redis.defineCommand('addDayTokens', { numberOfKeys: 1, lua: ADD_TOKENS_SCRIPT });
    redis.defineCommand('holdDayTokens', { numberOfKeys: 1, lua: HOLD_WITHIN_SCRIPT });
    this.commands = redis as unknown as LimiterCommands;
  }

  async admit(key: AuthenticatedKey, holdTokens = 0): Promise<RateLimitDecision> {
    const tokens = wholeTokens(holdTokens);
    let today: DayRun;
    try {
      today = await this.onToday(key.id, (dayKey) => this.run(key, dayKey, tokens));
    } catch (error) {
      this.fellBack(error);
      return await this.fallback.admit(key, tokens);
    }
    const { now, day, result } = today;
    const resetTokensMs = msUntilNextUtcDay(now);
    if (result[0] === 0 && result[1] === 1) {
      this.remember(key.id, now + resetTokensMs, () => tokensPerDayExceeded(result[2], key.tpdLimit, msUntilNextUtcDay(this.now())));
      throw tokensPerDayExceeded(result[2], key.tpdLimit, resetTokensMs);
    }
    if (result[0] === 0) {
      const until = now + result[2];
      this.remember(key.id, until, () => requestsPerMinuteExceeded(key.rpmLimit, until - this.now()));
      throw requestsPerMinuteExceeded(key.rpmLimit, result[2]);
    }
    return {
      hold: { apiKeyId: key.id, day, tokens, shared: true },
      remainingRequests: result[1],
      resetRequestsSeconds: Math.max(0, Math.ceil(result[2] / 1000)),
      remainingTokens: Math.max(0, key.tpdLimit - (result[3] ?? 0)),
      resetTokensSeconds: Math.ceil(resetTokensMs / 1000),
      overLimitTokens: Math.min(tokens, Math.max(0, (result[3] ?? 0) - key.tpdLimit)),
    };
  }

  resize(hold: TokenHold, tokens: number): TokenHold {
    const lower = Math.max(0, Math.min(hold.tokens, Math.ceil(tokens)));
    if (!hold.shared) return this.fallback.resize(hold, lower);
    this.fallback.addTokens(hold.apiKeyId, 0);
    this.addDayTokens(this.dayKey(hold.apiKeyId, hold.day), lower - hold.tokens);
    return { ...hold, tokens: lower };
  }

  /**
   * From what Redis last answered this server for the key (a full minute, a spent day), until
   * it would change: no round trip before a body is read. Another server's refusals are not
   * seen here; `admit` decides exactly.
   */
  refusalNow(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>): AppError | null {
    if (this.fallingBack) return this.fallback.refusalNow(key);
    const refused = this.refusedUntil.get(key.id);
    if (!refused) return null;
    if (this.now() < refused.until) return refused.error();
    this.refusedUntil.delete(key.id);
    return null;
  }

  private remember(apiKeyId: string, until: number, error: () => AppError): void {
    // Bounded: a flood of keys refused once each must not grow it without end.
    if (this.refusedUntil.size >= 10_000) this.refusedUntil.clear();
    this.refusedUntil.set(apiKeyId, { until, error });
  }

  async holdWithin(key: Pick<AuthenticatedKey, 'id' | 'rpmLimit' | 'tpdLimit'>, holdTokens: number): Promise<TokenHold | null> {
    const tokens = wholeTokens(holdTokens);
    let today: DayRun;
    try {
      today = await this.onToday(key.id, (dayKey) => this.commands.holdDayTokens(dayKey, key.tpdLimit, tokens));
    } catch (error) {
      this.fellBack(error);
      return await this.fallback.holdWithin(key, tokens);
    }
    if (today.result[0] !== 1) return null;
    return { apiKeyId: key.id, day: today.day, tokens, shared: true };
  }

  /**
   * Runs `script` on the key's counter of today; when Redis has no counter for the day (the
   * script answers -1: expired, flushed, or a new Redis) it is loaded from the day's recorded
   * usage and the script runs again. Redis being unreachable throws (the caller falls back).
   */
  private async onToday(apiKeyId: string, script: (dayKey: string) => Promise<number[]>): Promise<DayRun> {
    const now = this.now();
    const day = Math.floor(now / DAY_MS);
    const dayKey = this.dayKey(apiKeyId, day);
    let result = await script(dayKey);
    if (result[0] === -1) {
      await this.loadDay(apiKeyId, dayKey, now);
      result = await script(dayKey);
    }
    this.fallingBack = false;
    return { now, day, result };
  }

  private fellBack(error: unknown): void {
    this.fallingBack = true;
    this.warn(error);
  }

  /**
   * A hold taken in Redis is replaced there by the usage (and the usage mirrored in the
   * fallback, which has to know the day's total if Redis goes away); a hold taken by the
   * fallback while Redis was away is settled there, and the usage added to Redis.
   */
  settle(hold: TokenHold, usedTokens: number): void {
    const used = Math.max(0, usedTokens);
    if (!hold.shared) {
      this.fallback.settle(hold, used);
      this.addDayTokens(this.dayKey(hold.apiKeyId, hold.day), used);
      return;
    }
    this.fallback.addTokens(hold.apiKeyId, used);
    this.addDayTokens(this.dayKey(hold.apiKeyId, hold.day), used - hold.tokens);
  }

  addTokens(apiKeyId: string, tokens: number): void {
    if (tokens <= 0) return;
    this.fallback.addTokens(apiKeyId, tokens);
    this.addDayTokens(this.dayKey(apiKeyId, Math.floor(this.now() / DAY_MS)), tokens);
  }

  private addDayTokens(dayKey: string, tokens: number): void {
    if (tokens === 0) return;
    this.commands.addDayTokens(dayKey, tokens).catch((error) => this.warn(error));
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  degraded(): string | null {
    return this.fallingBack ? 'Redis is unreachable: each server limits requests in its own process until it is back' : null;
  }

  private run(key: AuthenticatedKey, dayKey: string, holdTokens: number): Promise<number[]> {
    const member = `${this.memberPrefix}:${(this.sequence++).toString(36)}`;
    return this.commands.admitRequest(`${this.keyPrefix}{${key.id}}:rpm`, dayKey, key.rpmLimit, key.tpdLimit, this.windowMs, member, holdTokens);
  }

  /**
   * Seeds the day counter from recorded usage (SET NX: the first server to load wins, later
   * loads change nothing). Until it exists addTokens leaves it alone, so history is never
   * overwritten by a partial count; the price is that a request finishing during the load,
   * whose usage record is not flushed yet, can be missed: at most one flush interval's
   * tokens, once per key and day.
   */
  private loadDay(apiKeyId: string, dayKey: string, now: number): Promise<void> {
    let loading = this.loading.get(dayKey);
    if (!loading) {
      const dayStart = new Date(Math.floor(now / DAY_MS) * DAY_MS);
      loading = this.tokensSince(apiKeyId, dayStart)
        .then(async (tokens) => {
          await this.redis.set(dayKey, tokens, 'PX', 2 * DAY_MS, 'NX');
        })
        .finally(() => this.loading.delete(dayKey));
      this.loading.set(dayKey, loading);
    }
    return loading;
  }

  private dayKey(apiKeyId: string, day: number): string {
    return `${this.keyPrefix}{${apiKeyId}}:tpd:${day}`;
  }

  private warn(error: unknown): void {
    if (this.now() - this.lastWarningAt < 10_000) return;
    this.lastWarningAt = this.now();
    this.logger.warn({ err: error }, 'Redis rate-limit store unavailable; limiting in this process until it returns');
  }
}

/** What a script on today's counter answered, and for which day (`now` is when it was asked). */
interface DayRun { now: number; day: number; result: number[] }

/** A hold is whole tokens, never negative. */
function wholeTokens(holdTokens: number): number {
  return Math.max(0, Math.ceil(holdTokens));
}
