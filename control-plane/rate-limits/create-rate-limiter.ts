import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { LocalRateLimiter } from './local-rate-limiter';
import type { RateLimiter, TokensSince } from './rate-limit-decision';
import { RedisRateLimiter } from './redis-rate-limiter';

export interface RateLimiterSettings {
  redisUrl?: string;
  redisKeyPrefix: string;
}

/**
 * In-process limits for one server; Redis-backed shared limits when `redisUrl` is set.
 * An unreachable Redis at start is a configuration error (said at once, naming the variable);
 * an outage later only degrades limits to per-process ones.
 */
export async function createRateLimiter(settings: RateLimiterSettings, tokensSince: TokensSince, logger: Logger): Promise<RateLimiter> {
  const local = new LocalRateLimiter(tokensSince);
  if (!settings.redisUrl) return local;
  // No offline queue: while Redis is away a command fails at once and the request is limited
  // locally, instead of waiting for a reconnect on the request path.
  const redis = new Redis(settings.redisUrl, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  redis.on('error', (error) => logger.debug({ err: error }, 'redis connection error'));
  try {
    await redis.connect();
  } catch (error) {
    redis.disconnect();
    throw new Error(`REDIS_URL: cannot connect to Redis at ${withoutPassword(settings.redisUrl)}: ${(error as Error).message}`, { cause: error });
  }
  return new RedisRateLimiter(redis, tokensSince, local, logger, { keyPrefix: `${settings.redisKeyPrefix}rl:` });
}

function withoutPassword(url: string): string {
  const parsed = new URL(url);
  if (parsed.password) parsed.password = '***';
  return parsed.toString();
}
