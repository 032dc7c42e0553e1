import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { simulateLoad } from '../../control-plane/autoscaling/load-simulator';
import { stepTrace } from '../../control-plane/autoscaling/load-traces';

/** Autoscale off with min = max: a fixed deployment, so the queueing arithmetic shows plainly. */
const FIXED = { targetConcurrency: 10, serviceTimeMs: 5_000, minReplicas: 2, maxReplicas: 2, autoscale: false, autoscaler: new Autoscaler() };
const constant = (seconds: number, rate: number) => stepTrace({ seconds, atSecond: 0, before: rate, after: rate });

describe('simulateLoad', () => {
  it('under capacity: in flight is rate × service time (Little), nothing waits, every replica-second is paid', () => {
    const result = simulateLoad({ ...FIXED, trace: constant(600, 3) });
    expect(result.decisions.at(-1)).toMatchObject({ inFlight: 15, queued: 0 });
    expect(result).toMatchObject({ requestsArrived: 1_800, requestsServed: 1_800, requestsUnserved: 0, requestsOverQueueingTarget: 0, replicaSeconds: 1_200 });
    expect(result.queueingDelayMs).toEqual({ p50: 0, p99: 0, max: 0 });
  });

  it('over capacity: the queue grows by the excess every second and waits are measured from arrival', () => {
    // 5 req/s into 20 slots of 5 s (4 req/s): one more queued every second.
    const result = simulateLoad({ ...FIXED, trace: constant(100, 5) });
    expect(result.requestsArrived).toBe(500);
    // 20 slots busy for 100 s at 5 s a request: 400 served; the last of them arrived at 79 s.
    expect(result).toMatchObject({ requestsServed: 400, requestsUnserved: 100 });
    expect(result.decisions.at(-1)).toMatchObject({ inFlight: 20, queued: 95 });
    expect(result.queueingDelayMs.max).toBe(19_000);
    expect(result.requestsOverQueueingTarget).toBeGreaterThan(300);
  });

  it('a replica ordered by the autoscaler serves exactly the start-up delay later, and is paid from the order', () => {
    const result = simulateLoad({
      ...FIXED, autoscale: true, minReplicas: 1, maxReplicas: 4, initialReplicas: 1, replicaStartupMs: 60_000, trace: constant(120, 6),
    });
    const ordered = result.decisions.find((decision) => decision.action === 'scale_up')!;
    expect(ordered).toMatchObject({ currentReplicas: 1, readyReplicas: 1 });
    const readyAt = result.decisions.find((decision) => decision.readyReplicas > 1)!.at;
    expect(readyAt - ordered.at).toBe(60_000);
    // Paid: 1 replica for 120 s, plus every ordered one from its order to the end.
    const orderedSeconds = result.decisions.reduce((sum, decision) =>
      sum + Math.max(0, decision.desiredReplicas - decision.currentReplicas) * (120 - decision.at / 1000), 0);
    expect(result.replicaSeconds).toBe(120 + orderedSeconds);
  });

  it('a replica given back drains: it takes no new work and is paid for one more service time', () => {
    const result = simulateLoad({ ...FIXED, minReplicas: 1, maxReplicas: 3, initialReplicas: 3, trace: constant(60, 1) });
    expect(result.decisions[0]).toMatchObject({ currentReplicas: 3, desiredReplicas: 1, reason: 'autoscale_off' });
    expect(result.replicaSeconds).toBe(60 + 2 * 5);
  });

  it('replays the same Poisson arrivals for the same seed', () => {
    const run = (arrivalSeed: number) => simulateLoad({ ...FIXED, trace: constant(3_600, 3), arrivalSeed });
    expect(run(11).requestsArrived).toBe(run(11).requestsArrived);
    expect(run(11).requestsArrived).not.toBe(run(12).requestsArrived);
    expect(Math.abs(run(11).requestsArrived - 10_800)).toBeLessThan(4 * Math.sqrt(10_800));
  });
});
