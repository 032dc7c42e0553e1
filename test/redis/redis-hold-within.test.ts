import { Redis } from 'ioredis';
import pino from 'pino';
import { LocalRateLimiter } from '../../control-plane/rate-limits/local-rate-limiter';
import { RedisRateLimiter } from '../../control-plane/rate-limits/redis-rate-limiter';
import { describeWithRedis, removeRedisKeys, TEST_REDIS_URL, testRedisPrefix } from '../support/test-redis';

/** Batch lines' holds on the shared day counter: two servers never hold more than the limit between them. */
describeWithRedis('RedisRateLimiter.holdWithin (real Redis)', () => {
  const keyPrefix = testRedisPrefix();
  const clients: Redis[] = [];
  const limiter = () => {
    const redis = new Redis(TEST_REDIS_URL!, { enableOfflineQueue: true, maxRetriesPerRequest: 1 });
    clients.push(redis);
    const tokensSince = async () => 10;
    return new RedisRateLimiter(redis, tokensSince, new LocalRateLimiter(tokensSince), pino({ level: 'silent' }), { keyPrefix });
  };

  afterAll(async () => {
    await removeRedisKeys(keyPrefix, clients);
  });

  it('holds only what fits whole across servers, from the recorded day, and frees it on settle', async () => {
    const [serverA, serverB] = [limiter(), limiter()];
    const key = { id: 'key_hold', workspaceId: 'ws', rpmLimit: 1, tpdLimit: 100, creditExhausted: false };
    const holds = await Promise.all(Array.from({ length: 10 }, (_, index) => (index % 2 ? serverA : serverB).holdWithin(key, 20)));
    // 10 tokens recorded today, so four holds of 20 fit under 100 and no fifth.
    expect(holds.filter((hold) => hold !== null)).toHaveLength(4);
    serverA.settle(holds.find((hold) => hold !== null)!, 0);
    expect(await serverB.holdWithin(key, 20)).not.toBeNull();
    expect(await serverB.holdWithin(key, 11)).toBeNull();
    expect(await serverA.holdWithin(key, 10)).not.toBeNull();
  });
});
