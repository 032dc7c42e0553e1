import { GuestFairness } from '../../../control-plane/sharing/guest-fairness';

const MODEL = 'acme/chat-8b';

/**
 * A shared pool of `slots` guest slots, simulated on a fake clock: each guest attempts at its
 * own fixed interval (open loop, as a flood does), a refusal is never queued, an admitted
 * request holds its slot `serviceMs`. Returns what each guest was served.
 */
function simulate(options: { slots: number; serviceMs: number; seconds: number; intervals: Record<string, number>; stopAt?: Record<string, number>; withoutRule?: boolean }) {
  let now = 0;
  const fairness = new GuestFairness({ contendWindowMs: 1_000, now: () => now });
  const served: Record<string, number> = {};
  const attempts: Record<string, number> = {};
  const ends: Array<{ at: number; guest: string }> = [];
  const next: Record<string, number> = {};
  for (const [guest, interval] of Object.entries(options.intervals)) {
    served[guest] = 0;
    attempts[guest] = 0;
    next[guest] = interval / 2;
  }
  for (now = 0; now < options.seconds * 1_000; now++) {
    for (let index = ends.length - 1; index >= 0; index--) {
      if (ends[index].at <= now) {
        fairness.finished(MODEL, ends[index].guest);
        ends.splice(index, 1);
      }
    }
    for (const [guest, interval] of Object.entries(options.intervals)) {
      if ((options.stopAt?.[guest] ?? Infinity) <= now) continue;
      while (next[guest] <= now) {
        next[guest] += interval;
        attempts[guest]++;
        if (ends.length < options.slots && (options.withoutRule || fairness.allows(MODEL, guest, options.slots - ends.length))) {
          fairness.admitted(MODEL, guest);
          ends.push({ at: now + options.serviceMs, guest });
          served[guest]++;
        } else {
          fairness.refused(MODEL, guest);
        }
      }
    }
  }
  return { served, attempts, fairness };
}

describe('GuestFairness', () => {
  test.each<[number, number]>([[4, 660], [5, 660], [3, 250], [6, 400], [2, 1_000]])(
    'two guests at 1:10 attempt rates on %i slots (%i ms requests): the smaller is served about half, at least 40 %%',
    (slots, serviceMs) => {
      const { served, attempts } = simulate({ slots, serviceMs, seconds: 60, intervals: { small: 30, flood: 3 } });
      expect(attempts.flood / attempts.small).toBeCloseTo(10, 0);
      const share = served.small / (served.small + served.flood);
      expect(share).toBeGreaterThanOrEqual(0.4);
      expect(share).toBeLessThanOrEqual(0.6);
      // Work-conserving: the pool stayed (almost) full.
      expect(served.small + served.flood).toBeGreaterThan(0.95 * (60_000 / serviceMs) * slots);
    },
  );

  test('without the rule the flood takes nearly everything (what the rule is for)', () => {
    const { served } = simulate({ slots: 4, serviceMs: 660, seconds: 60, intervals: { small: 30, flood: 3 }, withoutRule: true });
    expect(served.small / (served.small + served.flood)).toBeLessThan(0.3);
  });

  test('a lone guest may take every slot; three guests share evenly', () => {
    const alone = simulate({ slots: 4, serviceMs: 500, seconds: 20, intervals: { flood: 3 } });
    expect(alone.served.flood).toBeGreaterThan(0.95 * 40 * 4);
    const three = simulate({ slots: 6, serviceMs: 500, seconds: 30, intervals: { a: 3, b: 10, c: 50 } });
    const total = three.served.a + three.served.b + three.served.c;
    for (const guest of ['a', 'b', 'c']) expect(three.served[guest] / total).toBeGreaterThan(0.28);
  });

  test('a guest whose requests are all admitted holds nothing back from a flooding one', () => {
    let now = 10_000;
    const fairness = new GuestFairness({ contendWindowMs: 1_000, now: () => now });
    fairness.admitted(MODEL, 'small'); // asks now and then, never refused
    for (let index = 0; index < 3; index++) fairness.admitted(MODEL, 'flood');
    fairness.refused(MODEL, 'flood');
    now += 10;
    expect(fairness.allows(MODEL, 'flood')).toBe(true); // holds 3 against 1, but the small one wants nothing more
    fairness.refused(MODEL, 'small'); // now it does
    expect(fairness.allows(MODEL, 'flood')).toBe(false);
    expect(fairness.allows(MODEL, 'small')).toBe(true);
    now += 1_001; // and stops asking: after the window it holds nothing back again
    expect(fairness.allows(MODEL, 'flood')).toBe(true);
  });

  test('ties take turns: at equal slots, the one that had the odd slot least recently goes first', () => {
    let now = 0;
    const fairness = new GuestFairness({ contendWindowMs: 1_000, now: () => now });
    fairness.refused(MODEL, 'a');
    fairness.refused(MODEL, 'b');
    now = 1;
    fairness.admitted(MODEL, 'a'); // b wanted one too and held as few: the odd slot was a's
    now = 2;
    fairness.admitted(MODEL, 'b'); // b had fewer: back to an even split, no odd slot
    expect([fairness.allows(MODEL, 'a'), fairness.allows(MODEL, 'b')]).toEqual([false, true]);
    now = 3;
    fairness.admitted(MODEL, 'b'); // now b has had it last
    fairness.finished(MODEL, 'b');
    expect([fairness.allows(MODEL, 'a'), fairness.allows(MODEL, 'b')]).toEqual([true, false]);
  });

  test('closed loops with jittered service times, as the integration test runs them: 3 loops against 30 share 3 slots about evenly', () => {
    let seed = 3;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    let now = 0;
    const fairness = new GuestFairness({ contendWindowMs: 1_000, now: () => now });
    const slots = 3;
    let busy = 0;
    const served = { small: 0, flood: 0 };
    const attempts = { small: 0, flood: 0 };
    // Each loop: the time of its next attempt, and the end of the request it holds (0: none).
    const loops = [...Array.from({ length: 3 }, () => 'small' as const), ...Array.from({ length: 30 }, () => 'flood' as const)]
      .map((guest) => ({ guest, nextAt: Math.floor(random() * 20), endsAt: 0 }));
    for (now = 0; now < 120_000; now++) {
      for (const loop of loops) {
        if (loop.endsAt !== 0 && loop.endsAt <= now) {
          fairness.finished(MODEL, loop.guest);
          busy--;
          loop.endsAt = 0;
          loop.nextAt = now + 1; // the next request right after an answer
        }
      }
      for (const loop of loops) {
        if (loop.endsAt !== 0 || loop.nextAt > now) continue;
        attempts[loop.guest]++;
        if (busy < slots && fairness.allows(MODEL, loop.guest, slots - busy)) {
          fairness.admitted(MODEL, loop.guest);
          busy++;
          served[loop.guest]++;
          loop.endsAt = now + 175 + Math.floor(random() * 150);
        } else {
          fairness.refused(MODEL, loop.guest);
          loop.nextAt = now + 10;
        }
      }
    }
    expect(attempts.flood).toBeGreaterThan(5 * attempts.small);
    const share = served.small / (served.small + served.flood);
    expect(share).toBeGreaterThanOrEqual(0.45);
    expect(share).toBeLessThanOrEqual(0.55);
  });

  test('a guest that stops asking stops holding slots back once its contention window passes', () => {
    const { served, fairness } = simulate({ slots: 4, serviceMs: 300, seconds: 10, intervals: { small: 30, flood: 3 }, stopAt: { small: 5_000 } });
    expect(served.small).toBeGreaterThan(0);
    // The last 4 seconds the flood had every slot again.
    expect(fairness.inFlight(MODEL, 'flood')).toBe(4);
    expect(fairness.inFlight(MODEL, 'small')).toBe(0);
  });

  test('each wanting guest that outranks claims one idle slot: with more idle slots than claimants, the others still get one', () => {
    let now = 0;
    const fairness = new GuestFairness({ contendWindowMs: 1_000, now: () => now });
    for (let index = 0; index < 3; index++) fairness.admitted(MODEL, 'flood');
    fairness.refused(MODEL, 'a');
    fairness.refused(MODEL, 'b');
    now = 10;
    expect([1, 2, 3].map((idle) => fairness.allows(MODEL, 'flood', idle))).toEqual([false, false, true]);
    expect(fairness.allows(MODEL, 'a', 1)).toBe(true);
    expect(fairness.allows(MODEL, 'a', 0)).toBe(false);
  });

  test('finished never goes below zero and unknown guests are allowed', () => {
    const fairness = new GuestFairness({ contendWindowMs: 1_000 });
    fairness.finished(MODEL, 'nobody');
    expect(fairness.inFlight(MODEL, 'nobody')).toBe(0);
    expect(fairness.allows(MODEL, 'nobody')).toBe(true);
  });
});
