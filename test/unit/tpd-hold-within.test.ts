import { LocalRateLimiter } from '../../control-plane/rate-limits/local-rate-limiter';

/** A hold that waits for budget (batch lines) never takes the day past its limit, and counts no request. */
describe('LocalRateLimiter.holdWithin', () => {
  const key = { id: 'key_1', workspaceId: 'ws_1', rpmLimit: 1, tpdLimit: 100, creditExhausted: false };

  it('holds only what fits whole, gives it back on settle, and leaves RPM alone', async () => {
    const limiter = new LocalRateLimiter(async () => 30);
    const first = await limiter.holdWithin(key, 60);
    expect(first).toMatchObject({ apiKeyId: 'key_1', tokens: 60 });
    expect(await limiter.holdWithin(key, 20)).toBeNull();
    limiter.settle(first!, 10);
    expect(await limiter.holdWithin(key, 61)).toBeNull();
    expect(await limiter.holdWithin(key, 50)).not.toBeNull();
    // A live request is still admitted (RPM 1 untouched by the holds), the day being under its limit.
    expect((await limiter.admit(key, 0)).remainingRequests).toBe(0);
  });
});
