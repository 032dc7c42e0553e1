import { seededRandom } from '../../common/seeded-random';
import { oracleReplicasAt, solveOracle, violationTable, type OracleOptions } from '../../control-plane/autoscaling/oracle';
import { handModel, handTrace } from './trace-builder';

/**
 * Three 10 s intervals, one slot per replica, 3 s of start-up, 2 s of SLO; no prompt, so TTFT
 * is the wait. Interval 0: one request of 5 s. Interval 1: none. Interval 2: three of 5 s at
 * 20, 21 and 22 s: on 1 replica they wait 0, 4 and 8 s (2 misses), on 2 they wait 0, 0 and 3 s
 * (1 miss), on 3 none.
 */
const HAND = handTrace(30, [[0, 0, 5], [20_000, 0, 5], [21_000, 0, 5], [22_000, 0, 5]]);
const BASE: OracleOptions = {
  trace: HAND, model: handModel(), sloMs: 2_000, share: 1, intervalMs: 10_000, minReplicas: 0, maxReplicas: 3, initialReplicas: 1, warmupMs: 0,
};

describe('solveOracle on a case checked by hand', () => {
  it('counts each interval\'s misses per replica count', () => {
    const table = violationTable(BASE, 3);
    const row = (k: number) => Array.from(table.avoidable.slice(k * 4, k * 4 + 4));
    expect([row(0), row(1), row(2)]).toEqual([[1, 0, 0, 0], [0, 0, 0, 0], [3, 2, 1, 0]]);
  });

  it('with every request within the SLO: the replica it has, none while idle, three started for the last interval', () => {
    // [1, 0, 3]: 10 s for the free initial replica, 0, then 3 starts (9 s) and 30 s = 49 s.
    // Keeping the replica through the idle interval, [1, 1, 3], costs 10 + 10 + 6 + 30 = 56 s.
    const schedule = solveOracle(BASE);
    expect(Array.from(schedule.replicas)).toEqual([1, 0, 3]);
    expect(schedule).toMatchObject({ replicaSeconds: 49, starts: 3, violations: 0, allowedViolations: 0, requests: 4 });
  });

  it('with one miss allowed (75 %), spends it where it saves most: 2 replicas for the last interval', () => {
    // [1, 0, 2]: 10 + 0 + 6 + 20 = 36 s, one miss. [0, 0, 3] also misses one but costs 39 s.
    const schedule = solveOracle({ ...BASE, share: 0.75 });
    expect(Array.from(schedule.replicas)).toEqual([1, 0, 2]);
    expect(schedule).toMatchObject({ replicaSeconds: 36, violations: 1, allowedViolations: 1 });
  });

  it('keeps a replica through a gap shorter than a start-up is worth', () => {
    // Start-up 12 s: dropping the replica for interval 1 saves 10 s and costs a 12 s restart.
    const schedule = solveOracle({ ...BASE, model: handModel({ startupMs: 12_000 }), share: 0.75 });
    expect(Array.from(schedule.replicas)).toEqual([1, 1, 2]);
    expect(schedule.replicaSeconds).toBe(10 + 10 + 12 + 20);
  });

  it('honours minReplicas and refuses what no count can meet, naming the setting', () => {
    expect(Array.from(solveOracle({ ...BASE, minReplicas: 1 }).replicas)).toEqual([1, 1, 3]);
    expect(() => solveOracle({ ...BASE, maxReplicas: 2 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'maxReplicas' }));
    expect(() => solveOracle({ ...BASE, share: 0 })).toThrow(expect.objectContaining({ param: 'share' }));
  });

  it('takes misses no count avoids (a prefill over the SLO) out of the budget first', () => {
    // A 3,000-token prompt prefills in 3 s: over the 2 s SLO on any replica.
    const trace = handTrace(10, [[0, 3_000, 1], [5_000, 0, 1]]);
    const options = { ...BASE, trace, share: 0.5, initialReplicas: 0, maxReplicas: 1 };
    expect(violationTable(options, 1).unavoidable[0]).toBe(1);
    // One miss allowed, and the long prompt takes it: the other request must be served.
    expect(solveOracle(options)).toMatchObject({ violations: 1, allowedViolations: 1, replicaSeconds: 3 + 10 });
  });

  it('warms each interval with the requests before it: slots busy at its start delay its own', () => {
    // A request of 15 s at 5 s still holds the only slot when one arrives at 12 s.
    const trace = handTrace(20, [[5_000, 0, 15], [12_000, 0, 1]]);
    const cold = violationTable({ ...BASE, trace, maxReplicas: 2, warmupMs: 0 }, 2);
    const warm = violationTable({ ...BASE, trace, maxReplicas: 2, warmupMs: 10_000 }, 2);
    expect(cold.avoidable[3 + 1]).toBe(0);
    expect(warm.avoidable[3 + 1]).toBe(1);
    expect(warm.avoidable[3 + 2]).toBe(0);
  });
});

describe('solveOracle against brute force', () => {
  /** Every schedule in [min, max]^K, cheapest first among those within the miss budget. */
  function bruteForce(options: OracleOptions, intervals: number): number {
    const table = violationTable(options, intervals);
    const width = options.maxReplicas + 1;
    let unavoidable = 0;
    for (let k = 0; k < intervals; k++) unavoidable += table.unavoidable[k];
    const allowed = Math.floor((1 - options.share) * options.trace.arrivalMs.length + 1e-9);
    const startup = options.model.startupMs / 1000;
    let best = Number.POSITIVE_INFINITY;
    const schedule = new Array<number>(intervals).fill(options.minReplicas);
    const visit = (k: number) => {
      if (k === intervals) {
        let cost = 0;
        let misses = unavoidable;
        for (let index = 0; index < intervals; index++) {
          const previous = index === 0 ? options.initialReplicas : schedule[index - 1];
          cost += startup * Math.max(0, schedule[index] - previous) + (options.intervalMs / 1000) * schedule[index];
          misses += table.avoidable[index * width + schedule[index]];
        }
        if (misses <= allowed) best = Math.min(best, cost);
        return;
      }
      for (let n = options.minReplicas; n <= options.maxReplicas; n++) {
        schedule[k] = n;
        visit(k + 1);
      }
    };
    visit(0);
    return best;
  }

  it('finds the same minimum cost on 40 random tiny instances, and its schedule costs what it says', () => {
    const random = seededRandom(39);
    for (let instance = 0; instance < 40; instance++) {
      const intervals = 2 + Math.floor(random() * 4); // 2–5 intervals (segments of 2–3 for backtracking)
      const requests: Array<[number, number, number]> = [];
      for (let count = Math.floor(random() * 12); count > 0; count--) {
        requests.push([Math.floor(random() * intervals * 10_000), Math.floor(random() * 2_500), 1 + Math.floor(random() * 12)]);
      }
      requests.sort((left, right) => left[0] - right[0]);
      const options: OracleOptions = {
        trace: handTrace(intervals * 10, requests), model: handModel({ slots: 1 + Math.floor(random() * 2), startupMs: 1_000 + Math.floor(random() * 20_000) }),
        sloMs: 2_000, share: [1, 0.9, 0.75, 0.5][Math.floor(random() * 4)], intervalMs: 10_000,
        minReplicas: Math.floor(random() * 2), maxReplicas: 3, initialReplicas: Math.floor(random() * 3), warmupMs: 5_000,
      };
      const expected = bruteForce(options, intervals);
      if (!Number.isFinite(expected)) {
        expect(() => solveOracle(options)).toThrow(expect.objectContaining({ param: 'maxReplicas' }));
        continue;
      }
      const schedule = solveOracle(options);
      expect(schedule.replicaSeconds).toBeCloseTo(expected, 9);
      let cost = 0;
      schedule.replicas.forEach((n, k) => {
        cost += (options.model.startupMs / 1000) * Math.max(0, n - (k === 0 ? options.initialReplicas : schedule.replicas[k - 1])) + 10 * n;
      });
      expect(cost).toBeCloseTo(schedule.replicaSeconds, 9);
      expect(schedule.violations).toBeLessThanOrEqual(schedule.allowedViolations);
    }
  });
});

describe('oracleReplicasAt', () => {
  it('has each interval\'s replicas, ordered a lead ahead of an interval that needs more, given back when it ends', () => {
    const at = oracleReplicasAt({ intervalMs: 10_000, replicas: Int32Array.from([1, 0, 3, 1]) } as never, 4_000);
    expect([0, 5_000, 9_999, 10_000, 15_000, 16_000, 20_000, 29_999, 30_000, 45_000].map(at)).toEqual([1, 1, 1, 0, 0, 3, 3, 3, 1, 1]);
  });
});
