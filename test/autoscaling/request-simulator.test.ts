import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { CHAT_LENGTHS, requestTrace, stepTrace } from '../../control-plane/autoscaling/load-traces';
import { simulateRequests, type RequestSimulationOptions } from '../../control-plane/autoscaling/request-simulator';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';
import type { ScalingPolicy } from '../../control-plane/autoscaling/scaling-policy';
import { handModel, handTrace } from './trace-builder';

const SLO = { ttftP95Ms: 2_000, tpotP95Ms: null, queueWaitP95Ms: null };

/** Asks for `replicas(now)` and records every observation it was given. */
class ScriptedPolicy implements ScalingPolicy<null> {
  readonly name = 'concurrency' as const;
  readonly seen: ScalingObservation[] = [];
  constructor(private readonly replicas: (now: number) => number) {}
  newState(): null {
    return null;
  }
  decide(_state: null, observation: ScalingObservation, now: number): ScalingDecision {
    this.seen.push(observation);
    const desired = this.replicas(now);
    const current = observation.currentReplicas;
    return {
      deploymentId: observation.deploymentId, at: now, action: desired > current ? 'scale_up' : desired < current ? 'scale_down' : 'hold',
      reason: 'within_tolerance', explanation: '', desiredReplicas: desired, currentReplicas: current, readyReplicas: observation.readyReplicas,
      wantedReplicas: desired, recommendedReplicas: desired, signal: 0, perReplicaLoad: 0, targetConcurrency: 1, inFlight: observation.inFlight,
      queued: observation.queued, minReplicas: observation.minReplicas, maxReplicas: observation.maxReplicas, autoscale: true, capacityLimit: null,
    };
  }
}

function simulate(options: Partial<RequestSimulationOptions<null>> & Pick<RequestSimulationOptions<null>, 'trace'>) {
  return simulateRequests<null>({ model: handModel(), slo: SLO, targetConcurrency: 1, minReplicas: 1, maxReplicas: 4, ...options });
}

describe('simulateRequests: one request at a time', () => {
  it('TTFT is the wait for a slot plus the uncached prompt at the prefill rate; the slot is held for prefill and decode', () => {
    // One slot. A: 500 tokens (0.5 s) + 5 s of output from 0. B arrives at 1 s, waits for A (5.5 s), prefills 1 s.
    const trace = handTrace(20, [[0, 500, 5], [1_000, 1_000, 2]]);
    const result = simulate({ trace, policy: new ScriptedPolicy(() => 1), model: handModel({ prefixHitRate: 0 }) });
    expect(Array.from(result.ttftByRequest)).toEqual([500, 4_500 + 1_000]);
    expect(result).toMatchObject({ requestsServed: 2, requestsWithinSlo: 1, withinSloShare: 0.5, requestsLost: 0, requestsRefused: 0 });
    expect(result.waitMs.max).toBe(4_500);
    // Prefix hits take their share of the prompt off the prefill.
    expect(simulate({ trace, policy: new ScriptedPolicy(() => 1), model: handModel({ prefixHitRate: 0.5 }) }).ttftByRequest[0]).toBe(250);
  });

  it('serves FIFO across the slots of every ready replica, the least busy first', () => {
    // Two replicas of 2 slots: four requests at once start at once, the fifth waits for the first to finish.
    const trace = handTrace(30, [0, 0, 0, 0, 0].map((at) => [at, 0, 4] as [number, number, number]));
    const result = simulate({ trace, policy: new ScriptedPolicy(() => 2), initialReplicas: 2, model: handModel({ slots: 2 }) });
    expect(Array.from(result.ttftByRequest)).toEqual([0, 0, 0, 0, 4_000]);
  });

  it('feeds the policy what production observes: in flight, queued, arrivals, KV use, last minute p95, idle time', () => {
    const policy = new ScriptedPolicy(() => 1);
    // Ten requests of 8 s from 0.1 s to 4.6 s, on one replica of 4 slots.
    const trace = handTrace(30, Array.from({ length: 10 }, (_, index) => [100 + index * 500, 0, 8] as [number, number, number]));
    simulate({ trace, policy, model: handModel({ slots: 4 }), decisionIntervalMs: 5_000 });
    const [first, second, third] = policy.seen;
    expect(first).toMatchObject({ inFlight: 0, queued: 0, currentReplicas: 1, readyReplicas: 1, arrivalsPerSecond: 0, kvCacheUsage: 0, observedP95Ms: null, waitingForReplica: 0 });
    expect(second).toMatchObject({ inFlight: 4, queued: 6, arrivalsPerSecond: 2, kvCacheUsage: 1, idleMs: 400, slo: SLO });
    expect(second.serviceModel).toEqual(handModel({ slots: 4 }));
    // At 10 s: the first four started at once and finished at 8.1-9.6 s; the next four (from
    // 2.1-3.6 s) started then, after 6 s of waiting: the p95 of the minute's eight TTFTs is 6 s.
    expect(third).toMatchObject({ inFlight: 4, queued: 2, arrivalsPerSecond: 0, idleMs: 5_400, observedP95Ms: 6_000 });
    const bare = new ScriptedPolicy(() => 1);
    simulate({ trace, policy: bare, reportServiceModel: false });
    expect(bare.seen[0].serviceModel).toBeUndefined();
  });
});

describe('simulateRequests: replicas', () => {
  it('an ordered replica serves a start-up later and is paid from its order; one given back drains first', () => {
    // From 1 to 2 replicas at 10 s (start-up 3 s), back to 1 at 20 s while both serve a 10 s request.
    const trace = handTrace(40, [[14_000, 0, 10], [15_000, 0, 10]]);
    const result = simulate({ trace, policy: new ScriptedPolicy((now) => (now >= 10_000 && now < 20_000 ? 2 : 1)), decisionIntervalMs: 5_000 });
    // The second request finds the new replica ready (13 s): no wait.
    expect(Array.from(result.ttftByRequest)).toEqual([0, 0]);
    // Both serve one request at 20 s: the first drains until its request ends (24 s), the
    // second, ordered at 10 s, stays to the end (40 s).
    expect(result.replicaSeconds).toBe(24 + 30);
    expect(result).toMatchObject({ replicaStarts: 1, scaleUps: 1, scaleDowns: 1, peakReplicas: 2 });
  });

  it('start-ups vary per start within the jitter, the same for the same seed', () => {
    const trace = handTrace(30, []);
    const readyAfterSeconds = (seed: number) => {
      const policy = new ScriptedPolicy(() => 2);
      simulate({ trace, policy, startupJitterMs: 1_000, startupSeed: seed, decisionIntervalMs: 1_000 });
      return policy.seen.findIndex((observation) => observation.readyReplicas === 2);
    };
    const seen = Array.from({ length: 20 }, (_, seed) => readyAfterSeconds(seed));
    expect(seen.every((seconds) => seconds >= 2 && seconds <= 4)).toBe(true);
    expect(new Set(seen).size).toBeGreaterThan(1);
    expect(readyAfterSeconds(5)).toBe(readyAfterSeconds(5));
    // Paid from the order, whatever the start-up took.
    expect(simulate({ trace, policy: new ScriptedPolicy(() => 2), startupJitterMs: 1_000, startupSeed: 5 }).replicaSeconds).toBe(60);
  });

  it('cancels a replica still starting before draining a ready one, and pays it up to the cancel', () => {
    const trace = handTrace(20, []);
    const result = simulate({ trace, policy: new ScriptedPolicy((now) => (now === 0 ? 2 : 1)), model: handModel({ startupMs: 10_000 }), decisionIntervalMs: 5_000 });
    expect(result.replicaSeconds).toBe(20 + 5);
  });

  it('replays the same requests and decisions for the same trace seed', () => {
    const rates = stepTrace({ seconds: 3_600, atSecond: 1_800, before: 0.5, after: 3 });
    const run = (seed: number) => simulateRequests({
      trace: requestTrace('step', rates, CHAT_LENGTHS, seed), policy: new Autoscaler(),
      model: { slots: 16, prefillTokensPerSecond: 4_000, decodeTokensPerSecond: 25, prefixHitRate: 0.3, meanPromptTokens: 1_100, meanOutputTokens: 230, startupMs: 60_000 },
      slo: SLO, targetConcurrency: 16, minReplicas: 1, maxReplicas: 8, startupJitterMs: 5_000, startupSeed: seed,
    });
    const [first, again, other] = [run(3), run(3), run(4)];
    expect(again.gpuHours).toBe(first.gpuHours);
    expect(again.decisions).toEqual(first.decisions);
    expect(other.requestsArrived).not.toBe(first.requestsArrived);
    expect(first.requestsLost).toBe(0);
    expect(first.scaleUps).toBeGreaterThan(0);
  });

  it('refuses a simulation with neither or both of a policy and a schedule', () => {
    const trace = handTrace(1, []);
    expect(() => simulate({ trace })).toThrow(expect.objectContaining({ param: 'policy' }));
    expect(() => simulate({ trace, policy: new ScriptedPolicy(() => 1), replicasAt: () => 1 })).toThrow(expect.objectContaining({ param: 'policy' }));
  });
});

describe('simulateRequests: scale to zero', () => {
  it('gives every replica back after the idle time, starts one at once when a request waits, and loses nothing', () => {
    // Requests at 1 s and at 100 s; scale to zero after 20 s idle; start-up 10 s.
    const trace = handTrace(200, [[1_000, 0, 2], [100_000, 0, 2]]);
    const result = simulateRequests({
      trace, policy: new Autoscaler(), model: handModel({ startupMs: 10_000 }), slo: SLO, targetConcurrency: 1,
      minReplicas: 0, maxReplicas: 2, scaleToZeroAfterMs: 20_000, decisionIntervalMs: 5_000,
    });
    const zero = result.decisions.find((decision) => decision.reason === 'scale_to_zero' && decision.action === 'scale_down')!;
    expect(zero).toMatchObject({ at: 25_000, desiredReplicas: 0, movedBy: 'idle' });
    expect(zero.explanation).toContain('no request for 24 s');
    const cold = result.decisions.find((decision) => decision.reason === 'cold_start')!;
    expect(cold).toMatchObject({ at: 100_000, currentReplicas: 0, desiredReplicas: 1, action: 'scale_up', movedBy: 'waiting' });
    expect(cold.explanation).toBe('Scaling up from 0 to 1 replica at once (cold start): 1 request waiting at the gateways for a replica.');
    // Waited for the start-up (it arrived on the decision), then served.
    expect(result.ttftByRequest[1]).toBe(10_000);
    expect(result).toMatchObject({ coldStarts: 1, requestsLost: 0, requestsRefused: 0, requestsServed: 2 });
    // Holds at zero in between, and the explanation says why.
    expect(result.decisions.filter((decision) => decision.at > 25_000 && decision.at < 100_000).every((decision) => decision.desiredReplicas === 0)).toBe(true);
  });

  it('queues at most the cold-start limit while no replica is ready and counts the rest as refused, not lost', () => {
    const trace = handTrace(60, Array.from({ length: 8 }, (_, index) => [30_000 + index * 100, 0, 1] as [number, number, number]));
    const result = simulateRequests({
      trace, policy: new Autoscaler(), model: handModel({ startupMs: 10_000 }), slo: SLO, targetConcurrency: 1, minReplicas: 0, maxReplicas: 2,
      initialReplicas: 0, scaleToZeroAfterMs: 20_000, coldStartQueueLimit: 5,
    });
    expect(result).toMatchObject({ requestsArrived: 8, requestsServed: 5, requestsRefused: 3, requestsLost: 0, coldStarts: 1 });
  });

  it('a schedule that ends at zero with requests waiting gets a replica to serve them', () => {
    const trace = handTrace(10, [[9_000, 0, 1]]);
    const result = simulate({ trace, replicasAt: () => 0, initialReplicas: 0, decisionIntervalMs: 5_000 });
    expect(result).toMatchObject({ requestsServed: 1, requestsLost: 0 });
  });
});
