import { Redis } from 'ioredis';
import pino from 'pino';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import { AppError } from '../../control-plane/errors/app-error';
import { LocalRateLimiter } from '../../control-plane/rate-limits/local-rate-limiter';
import { RedisRateLimiter } from '../../control-plane/rate-limits/redis-rate-limiter';
import { describeWithRedis, removeRedisKeys, TEST_REDIS_URL, testRedisPrefix } from '../support/test-redis';

/** Two limiters on one Redis stand for two gateway processes behind a load balancer. */
describeWithRedis('RedisRateLimiter (real Redis)', () => {
  const logger = pino({ level: 'silent' });
  const clients: Redis[] = [];
  const keyPrefix = testRedisPrefix();
  let keySequence = 0;

  const newKey = (limits: { rpmLimit?: number; tpdLimit?: number } = {}): AuthenticatedKey => ({
    id: `key_${keySequence++}`, workspaceId: 'ws', rpmLimit: limits.rpmLimit ?? 1_000, tpdLimit: limits.tpdLimit ?? 1_000_000, creditExhausted: false,
  });
  const limiter = (tokensSince = async () => 0, windowMs = 60_000) => {
    const redis = new Redis(TEST_REDIS_URL!, { enableOfflineQueue: true, maxRetriesPerRequest: 1 });
    clients.push(redis);
    return new RedisRateLimiter(redis, tokensSince, new LocalRateLimiter(tokensSince), logger, { keyPrefix, windowMs });
  };
  const outcome = (promise: Promise<unknown>) => promise.then(() => 'admitted', (error: AppError) => error.code);

  afterAll(async () => {
    await removeRedisKeys(keyPrefix, clients);
  });

  it('admits exactly the RPM limit across two servers, even for a concurrent burst', async () => {
    const [serverA, serverB] = [limiter(), limiter()];
    const key = newKey({ rpmLimit: 20 });
    const burst = Array.from({ length: 50 }, (_, index) => outcome((index % 2 ? serverA : serverB).admit(key)));
    const results = await Promise.all(burst);
    expect(results.filter((result) => result === 'admitted')).toHaveLength(20);
    expect(results.filter((result) => result === 'rate_limit_error')).toHaveLength(30);
  });

  it('counts remaining requests down across servers and frees a slot when the oldest request leaves the window', async () => {
    const [serverA, serverB] = [limiter(async () => 0, 400), limiter(async () => 0, 400)];
    const key = newKey({ rpmLimit: 3 });
    expect((await serverA.admit(key)).remainingRequests).toBe(2);
    expect((await serverB.admit(key)).remainingRequests).toBe(1);
    expect((await serverA.admit(key)).remainingRequests).toBe(0);
    const refused = await serverB.admit(key).catch((error: AppError) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).retryAfterSeconds).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 450));
    expect((await serverB.admit(key)).remainingRequests).toBe(2);
  });

  it('seeds TPD from recorded usage once, shares tokens between servers and refuses at the limit', async () => {
    let loads = 0;
    const tokensSince = async () => {
      loads++;
      return 60;
    };
    const [serverA, serverB] = [limiter(tokensSince), limiter(tokensSince)];
    const key = newKey({ tpdLimit: 100 });
    expect((await serverA.admit(key)).remainingTokens).toBe(40);
    expect((await serverB.admit(key)).remainingTokens).toBe(40);
    expect(loads).toBe(1);
    serverA.addTokens(key.id, 30);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await serverB.admit(key)).remainingTokens).toBe(10);
    serverB.addTokens(key.id, 15);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const refused = await serverA.admit(key).catch((error: AppError) => error);
    expect(refused).toBeInstanceOf(AppError);
    expect((refused as AppError).message).toContain('105 of 100 tokens');
  });

  it('holds a request\'s bound against TPD across servers until it is settled to its usage', async () => {
    const [serverA, serverB] = [limiter(), limiter()];
    const key = newKey({ tpdLimit: 50 });
    const outcomes = await Promise.all(Array.from({ length: 40 }, (_, index) => (index % 2 ? serverA : serverB).admit(key, 520).then((decision) => decision, () => null)));
    const admitted = outcomes.filter((decision) => decision !== null);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]!.hold).toMatchObject({ tokens: 520, shared: true });
    serverA.settle(admitted[0]!.hold, 30);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await serverB.admit(key, 0)).remainingTokens).toBe(20);
  });

  it('limits in process when Redis is unreachable instead of failing requests', async () => {
    const unreachable = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    unreachable.on('error', () => {});
    const fallbackLimiter = new RedisRateLimiter(unreachable, async () => 0, new LocalRateLimiter(async () => 0), logger, { keyPrefix });
    const key = newKey({ rpmLimit: 2 });
    expect(await outcome(fallbackLimiter.admit(key))).toBe('admitted');
    expect(await outcome(fallbackLimiter.admit(key))).toBe('admitted');
    expect(await outcome(fallbackLimiter.admit(key))).toBe('rate_limit_error');
    unreachable.disconnect();
  });
});
