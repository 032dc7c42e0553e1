import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

/**
 * Redis for the tests of shared (multi-server) state. CI sets TEST_REDIS_URL (its Redis on
 * 127.0.0.1:6379); a laptop without Redis runs everything else and reports these as skipped.
 */
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL;

export const describeWithRedis: jest.Describe = TEST_REDIS_URL ? describe : describe.skip;

/** A key prefix of its own per test file, so runs sharing one Redis never see each other's keys. */
export function testRedisPrefix(): string {
  return `test-${randomBytes(4).toString('hex')}:`;
}

/** After a file's tests: deletes every key under its prefix and closes the clients it opened. */
export async function removeRedisKeys(keyPrefix: string, clients: readonly Redis[]): Promise<void> {
  const cleanup = new Redis(TEST_REDIS_URL!);
  const keys = await cleanup.keys(`${keyPrefix}*`);
  if (keys.length > 0) await cleanup.del(...keys);
  await cleanup.quit();
  await Promise.all(clients.map((client) => client.quit()));
}
