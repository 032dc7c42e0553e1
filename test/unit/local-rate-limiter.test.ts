import { AppError } from '../../control-plane/errors/app-error';
import { LocalRateLimiter } from '../../control-plane/rate-limits/local-rate-limiter';

describe('LocalRateLimiter', () => {
  const key = { id: 'key_1', workspaceId: 'ws_1', rpmLimit: 100, tpdLimit: 1_000, creditExhausted: false };

  it('loads the day\'s recorded tokens once, adds new usage, and resets at 00:00 UTC', async () => {
    let now = Date.UTC(2026, 10, 22, 23, 59, 0);
    const loads: Date[] = [];
    const limiter = new LocalRateLimiter(async (_id, since) => {
      loads.push(since);
      return 900;
    }, () => now);
    const first = await limiter.admit(key);
    expect(first.remainingTokens).toBe(100);
    expect(first.resetTokensSeconds).toBe(60);
    expect(loads).toEqual([new Date(Date.UTC(2026, 10, 22))]);
    limiter.addTokens(key.id, 100);
    const error = await limiter.admit(key).catch((caught) => caught);
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe('rate_limit_error');
    expect(error.retryAfterSeconds).toBe(60);
    now += 61_000;
    expect((await limiter.admit(key)).remainingTokens).toBe(1_000);
    expect(loads).toHaveLength(1);
  });

  it('shares one usage load between concurrent first requests', async () => {
    let loads = 0;
    const limiter = new LocalRateLimiter(async () => {
      loads++;
      await new Promise((resolve) => setTimeout(resolve, 10));
      return 0;
    });
    await Promise.all([limiter.admit(key), limiter.admit(key), limiter.admit(key)]);
    expect(loads).toBe(1);
  });

  it('holds each admitted request\'s bound against TPD: 40 parallel max_tokens 500 at TPD 50 admit one, and settling frees the rest', async () => {
    const small = { ...key, id: 'key_tpd', tpdLimit: 50 };
    const limiter = new LocalRateLimiter(async () => 0);
    const outcomes = await Promise.all(Array.from({ length: 40 }, () => limiter.admit(small, 520).then((decision) => decision, () => null)));
    const admitted = outcomes.filter((decision) => decision !== null);
    expect(admitted).toHaveLength(1);
    expect(admitted[0]!.hold).toMatchObject({ apiKeyId: 'key_tpd', tokens: 520, shared: false });
    expect(admitted[0]!.remainingTokens).toBe(0);
    // It used 30: the budget shows 30 used, and one more request is admitted.
    limiter.settle(admitted[0]!.hold, 30);
    const next = await limiter.admit(small, 10);
    expect(next.remainingTokens).toBe(10);
    // A request that never ran gives its whole hold back.
    limiter.settle(next.hold, 0);
    expect((await limiter.admit(small)).remainingTokens).toBe(20);
  });

  it('settles a hold only on the day it was taken', async () => {
    let now = Date.UTC(2026, 10, 22, 23, 59, 59);
    const limiter = new LocalRateLimiter(async () => 0, () => now);
    const held = await limiter.admit(key, 600);
    now += 2_000;
    expect((await limiter.admit(key)).remainingTokens).toBe(1_000);
    limiter.settle(held.hold, 900);
    expect((await limiter.admit(key)).remainingTokens).toBe(1_000);
  });
});
