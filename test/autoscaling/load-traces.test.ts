import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { DEFAULT_AUTOSCALER_OPTIONS } from '../../control-plane/autoscaling/autoscaler-options';
import { simulateLoad, type LoadSimulationResult } from '../../control-plane/autoscaling/load-simulator';
import {
  burstTrace, CHAT_LENGTHS, diurnalTrace, rampTrace, requestTrace, sparseTrace, spikeTrainTrace, stepTrace, type ArrivalTrace,
} from '../../control-plane/autoscaling/load-traces';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';

/**
 * One replica holds 10 requests of 5 s, so it serves 2 req/s at its target; a replica serves
 * 60 s after it is ordered; the platform asks every 5 s. Arrivals are exactly the trace's
 * mean (no noise) except on the diurnal day, which is Poisson from a fixed seed.
 */
const DEPLOYMENT = {
  targetConcurrency: 10, serviceTimeMs: 5_000, minReplicas: 1, maxReplicas: 20, autoscale: true,
  replicaStartupMs: 60_000, decisionIntervalMs: 5_000, queueingTargetMs: 2_000,
};
const SECOND = 1_000;
const WINDOW_DOWN = DEFAULT_AUTOSCALER_OPTIONS.scaleDownStabilizationMs;

function simulate(trace: ArrivalTrace, overrides: Partial<Parameters<typeof simulateLoad>[0]> = {}): LoadSimulationResult {
  return simulateLoad({ ...DEPLOYMENT, trace, autoscaler: new Autoscaler(), ...overrides });
}

/** Replicas the trace's load needs at `at`, at the target: what an oracle would run. */
function need(trace: ArrivalTrace, at: number): number {
  return Math.max(1, Math.ceil((trace[Math.floor(at / SECOND)] * DEPLOYMENT.serviceTimeMs) / SECOND / DEPLOYMENT.targetConcurrency));
}

/** How often the direction of scaling turned around: 0 for only up, 1 for up then down. */
function reversals(decisions: ScalingDecision[]): number {
  const directions = decisions.filter((decision) => decision.action !== 'hold').map((decision) => decision.action);
  return directions.filter((direction, index) => index > 0 && direction !== directions[index - 1]).length;
}

/** The arrival seconds of the requests that waited longer than the queueing target. */
function overTargetSeconds(result: LoadSimulationResult): { first: number; last: number } {
  const seconds = [...result.overQueueingTargetBySecond.keys()].filter((second) => result.overQueueingTargetBySecond[second] > 0);
  return { first: seconds[0], last: seconds.at(-1)! };
}

describe('STEP: 1 → 20 req/s at 300 s (0.5 → 10 replicas of load)', () => {
  const trace = stepTrace({ seconds: 1_200, atSecond: 300, before: 1, after: 20 });
  let result: LoadSimulationResult;
  let after: ScalingDecision[];
  beforeAll(() => {
    result = simulate(trace);
    after = result.decisions.filter((decision) => decision.at >= 300 * SECOND);
  });

  it('orders the replicas the load needs within 10 s, and they serve a boot later', () => {
    expect(after.find((decision) => decision.desiredReplicas >= 10)!.at).toBeLessThanOrEqual(310 * SECOND);
    expect(after.find((decision) => decision.readyReplicas >= 10)!.at).toBeLessThanOrEqual(370 * SECOND);
  });

  it('drains the minute of backlog with extra replicas, then settles inside the dead band without flapping', () => {
    // The queue of the boot minute counts as load: it buys up to maxReplicas to drain it …
    expect(Math.max(...result.decisions.map((decision) => decision.desiredReplicas))).toBe(20);
    // … and only requests that arrived before the new replicas were ready waited too long.
    expect(overTargetSeconds(result)).toEqual({ first: 300, last: 427 });
    // 100 in flight: 10 replicas from below, up to ceil(100 / 9) = 12 coming down (the headroom).
    expect(result.decisions.at(-1)).toMatchObject({ desiredReplicas: 12, reason: 'within_tolerance' });
    expect(reversals(result.decisions)).toBe(1);
  });

  it('gives the backlog replicas back only after the scale-down window', () => {
    const lastAskingForAll = after.filter((decision) => decision.recommendedReplicas >= 20).at(-1)!.at;
    const firstDown = after.find((decision) => decision.action === 'scale_down')!.at;
    expect(firstDown - lastAskingForAll).toBe(WINDOW_DOWN);
  });
});

describe('RAMP: 1 → 20 → 1 req/s, 20 minutes each way', () => {
  const trace = rampTrace({ from: 1, to: 20, holdSeconds: 600, rampSeconds: 1_200 });
  let result: LoadSimulationResult;
  beforeAll(() => (result = simulate(trace)));
  const peakAt = 1_800 * SECOND;

  it('scales up only on the way up and down only on the way down', () => {
    expect(reversals(result.decisions)).toBe(1);
    expect(result.decisions.filter((decision) => decision.action === 'scale_up').at(-1)!.at).toBeLessThan(peakAt);
    expect(result.decisions.filter((decision) => decision.action === 'scale_down').every((decision) => decision.at > 1_500 * SECOND)).toBe(true);
    expect(result.scaleUps + result.scaleDowns).toBeLessThanOrEqual(25);
  });

  it('keeps up with the load (never more than 1 replica short) and comes back to 1', () => {
    expect(result.decisions.every((decision) => decision.desiredReplicas >= need(trace, decision.at) - 1)).toBe(true);
    expect(result.decisions.at(-1)!.desiredReplicas).toBe(1);
    expect(result.requestsOverQueueingTarget / result.requestsServed).toBeLessThan(0.04);
  });
});

describe('BURST: 1.5 req/s with 16 req/s for 60 s at 600 s', () => {
  const trace = burstTrace({ seconds: 1_800, base: 1.5, burst: 16, atSecond: 600, burstSeconds: 60 });
  let result: LoadSimulationResult;
  beforeAll(() => (result = simulate(trace)));
  const burstEnd = 660 * SECOND;

  it('scales up on the first decision of the burst and orders its 8 replicas within 10 s', () => {
    expect(result.decisions.find((decision) => decision.action === 'scale_up')!.at).toBe(600 * SECOND);
    expect(result.decisions.find((decision) => decision.desiredReplicas >= need(trace, 600 * SECOND))!.at).toBeLessThanOrEqual(610 * SECOND);
  });

  it('never scales down during the burst or the scale-down window after it, then steps down without flapping', () => {
    const downs = result.decisions.filter((decision) => decision.action === 'scale_down');
    expect(downs.filter((decision) => decision.at < burstEnd)).toHaveLength(0);
    expect(downs[0].at).toBeGreaterThanOrEqual(burstEnd + WINDOW_DOWN);
    expect(reversals(result.decisions)).toBe(1);
    expect(downs.map((decision) => decision.desiredReplicas)).toEqual([...Array(19).keys()].map((index) => 19 - index));
    expect(result.decisions.at(-1)!.desiredReplicas).toBe(1);
  });

  it('costs a quarter of a fixed-max deployment; only the burst and its boot minute wait too long', () => {
    const fixed = simulate(trace, { autoscale: false, minReplicas: 20, initialReplicas: 20 });
    expect(fixed.requestsOverQueueingTarget).toBe(0);
    expect(result.replicaSeconds).toBeLessThan(fixed.replicaSeconds / 3.5);
    expect(overTargetSeconds(result)).toEqual({ first: 600, last: 687 });
  });
});

describe('DIURNAL: 0.5 → 18 req/s over a simulated day, Poisson arrivals', () => {
  const trace = diurnalTrace({ seconds: 86_400, trough: 0.5, peak: 18 });
  let result: LoadSimulationResult;
  beforeAll(() => (result = simulate(trace, { arrivalSeed: 7 })));

  it('follows the load: never short of what it needs, at most 3 replicas over', () => {
    const differences = result.decisions.map((decision) => decision.desiredReplicas - need(trace, decision.at));
    expect(Math.min(...differences)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...differences)).toBeLessThanOrEqual(3);
    expect(result.requestsOverQueueingTarget / result.requestsServed).toBeLessThan(0.001);
  });

  it('flaps little: a couple of dozen scale actions, few turnarounds', () => {
    expect(result.scaleUps + result.scaleDowns).toBeLessThanOrEqual(30);
    expect(reversals(result.decisions)).toBeLessThanOrEqual(8);
  });

  it('uses about a third of the GPU-hours of fixed max, within a quarter of an oracle', () => {
    const oracleHours = trace.reduce((sum, _, second) => sum + need(trace, second * SECOND), 0) / 3_600;
    expect(result.gpuHours).toBeLessThan(0.35 * DEPLOYMENT.maxReplicas * 24);
    expect(result.gpuHours).toBeLessThan(1.25 * oracleHours);
  });

  it('records about one row a minute: holds coalesce, every action is kept', () => {
    expect(result.decisions).toHaveLength(17_280);
    expect(result.recordedDecisions.length).toBeGreaterThanOrEqual(1_440);
    expect(result.recordedDecisions.length).toBeLessThan(1_600);
    expect(result.recordedDecisions.filter((decision) => decision.action !== 'hold')).toHaveLength(result.scaleUps + result.scaleDowns);
  });
});

describe('request traces', () => {
  it('draws Poisson arrivals at the rate and lognormal lengths, the same for the same seed', () => {
    const rates = stepTrace({ seconds: 2_000, atSecond: 1_000, before: 2, after: 8 });
    const trace = requestTrace('step', rates, CHAT_LENGTHS, 5);
    const again = requestTrace('step', rates, CHAT_LENGTHS, 5);
    expect(again.arrivalMs).toEqual(trace.arrivalMs);
    expect(again.outputTokens).toEqual(trace.outputTokens);
    expect(requestTrace('step', rates, CHAT_LENGTHS, 6).arrivalMs.length).not.toBe(trace.arrivalMs.length);
    const before = trace.arrivalMs.filter((at) => at < 1_000_000).length;
    expect(Math.abs(before - 2_000)).toBeLessThan(4 * Math.sqrt(2_000));
    expect(Math.abs(trace.arrivalMs.length - before - 8_000)).toBeLessThan(4 * Math.sqrt(8_000));
    expect([...trace.arrivalMs].every((at, index, all) => index === 0 || at >= all[index - 1])).toBe(true);
    const median = (values: Uint32Array) => [...values].sort((left, right) => left - right)[values.length >> 1];
    expect(Math.abs(median(trace.promptTokens) - 800)).toBeLessThan(40);
    expect(Math.abs(median(trace.outputTokens) - 180)).toBeLessThan(10);
    expect(Math.max(...trace.promptTokens)).toBeLessThanOrEqual(8_000);
    expect(Math.min(...trace.outputTokens)).toBeGreaterThanOrEqual(1);
  });

  it('a spike train multiplies the base about once a period, within the jitter', () => {
    const { trace, spikes } = spikeTrainTrace({ seconds: 7_200, base: 2, periodSeconds: 1_200, jitterSeconds: 60, multiplier: [3, 6], spikeSeconds: [60, 180], seed: 1 });
    expect(spikes).toHaveLength(5);
    spikes.forEach((spike, index) => {
      expect(Math.abs(spike.atSecond - (index + 1) * 1_200)).toBeLessThanOrEqual(60);
      expect(trace[spike.atSecond]).toBeCloseTo(2 * spike.multiplier, 10);
      expect(trace[spike.atSecond + spike.seconds]).toBe(2);
    });
  });

  it('a sparse trace has sessions of use separated by idle gaps with no request', () => {
    const { trace, sessions } = sparseTrace({ seconds: 86_400, meanIdleSeconds: 5_400, sessionSeconds: [600, 2_400], sessionRate: [0.5, 2], seed: 42 });
    expect(sessions.length).toBeGreaterThan(5);
    const idleShare = trace.filter((rate) => rate === 0).length / trace.length;
    expect(idleShare).toBeGreaterThan(0.5);
    sessions.slice(1).forEach((session, index) => expect(session.atSecond).toBeGreaterThan(sessions[index].atSecond + sessions[index].seconds));
  });
});
