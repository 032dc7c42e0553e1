import { SlidingWindowLog } from '../../control-plane/rate-limits/sliding-window';

describe('SlidingWindowLog', () => {
  it('admits exactly `limit` requests in any window, never more and never fewer', () => {
    const window = new SlidingWindowLog(5, 60_000);
    const admittedAt: number[] = [];
    // A request every 2 s for 5 minutes: at most 5 fall in any 60 s window.
    for (let now = 0; now < 300_000; now += 2_000) if (window.tryAcquire(now, 5).allowed) admittedAt.push(now);
    for (const start of admittedAt) expect(admittedAt.filter((time) => time >= start && time < start + 60_000).length).toBeLessThanOrEqual(5);
    // Not early either: after the first 5, the next is admitted as soon as the oldest leaves.
    expect(admittedAt.slice(0, 6)).toEqual([0, 2_000, 4_000, 6_000, 8_000, 60_000]);
  });

  it('blocks a burst at a window edge that a fixed window would let through', () => {
    const window = new SlidingWindowLog(10, 60_000);
    for (let index = 0; index < 10; index++) expect(window.tryAcquire(59_000, 10).allowed).toBe(true);
    const denied = window.tryAcquire(60_500, 10);
    expect(denied.allowed).toBe(false);
    expect(denied.resetMs).toBe(58_500);
  });

  it('reports remaining and follows a changed limit', () => {
    const window = new SlidingWindowLog(3, 1_000);
    expect(window.tryAcquire(0, 3).remaining).toBe(2);
    expect(window.tryAcquire(1, 3).remaining).toBe(1);
    expect(window.tryAcquire(2, 2).allowed).toBe(false);
    expect(window.tryAcquire(3, 5).remaining).toBe(2);
  });
});

describe('SlidingWindowLog memory', () => {
  it('holds as many slots as requests in the window, not as many as the limit allows', () => {
    const window = new SlidingWindowLog(10_000_000, 60_000);
    for (let index = 0; index < 100; index++) expect(window.tryAcquire(index, 10_000_000).allowed).toBe(true);
    expect((window as unknown as { times: Float64Array }).times.length).toBe(128);
    // Exactness survives growth and a lower limit: the 40 most recent (at 60…99 ms) are kept,
    // so nothing is admitted until the one at 60 ms leaves the window at 60 060 ms.
    expect(window.tryAcquire(200, 40).allowed).toBe(false);
    expect(window.tryAcquire(60_059, 40).allowed).toBe(false);
    expect(window.tryAcquire(60_060, 40).allowed).toBe(true);
    expect(window.tryAcquire(60_060, 40).allowed).toBe(false);
  });
});
