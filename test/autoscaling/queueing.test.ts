import { erlangC, replicasForWaitTail, waitTailProbability } from '../../control-plane/autoscaling/queueing';

describe('M/M/c waiting times', () => {
  it('matches the closed forms: one server waits with probability ρ, two with 1/3 at a load of 1', () => {
    expect(erlangC(1, 0.6)).toBeCloseTo(0.6, 12);
    // c = 2, a = 1: C = (a² / 2 · 2 / (2 − a)) / (1 + a + a² / 2 · 2 / (2 − a)) = 1 / 3.
    expect(erlangC(2, 1)).toBeCloseTo(1 / 3, 12);
    // M/M/1: P(W > t) = ρ e^{−(1 − ρ) t / hold}.
    expect(waitTailProbability(1, 0.6, 1, 2)).toBeCloseTo(0.6 * Math.exp(-0.8), 12);
  });

  it('is 0 without load and 1 at or past saturation', () => {
    expect(waitTailProbability(4, 0, 10, 1)).toBe(0);
    expect(waitTailProbability(4, 0.4, 10, 1)).toBe(1);
  });

  it('sizes replicas as the fewest whose slots meet the tail, and more for a tighter budget or share', () => {
    // 2 req/s of 10 s holds: 20 busy slots; replicas of 16 slots.
    const replicas = replicasForWaitTail(2, 16, 10, 1.5, 0.05, 100);
    expect(waitTailProbability(replicas * 16, 2, 10, 1.5)).toBeLessThanOrEqual(0.05);
    expect(waitTailProbability((replicas - 1) * 16, 2, 10, 1.5)).toBeGreaterThan(0.05);
    expect(replicasForWaitTail(2, 16, 10, 0, 0.01, 100)).toBeGreaterThanOrEqual(replicas);
    expect(replicasForWaitTail(0, 16, 10, 1.5, 0.05, 100)).toBe(0);
    expect(replicasForWaitTail(1_000, 16, 10, 1.5, 0.05, 7)).toBe(7);
  });
});
