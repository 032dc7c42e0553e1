import { rampTrace, requestTrace, CHAT_LENGTHS } from '../../control-plane/autoscaling/load-traces';
import { replicasForWaitTail } from '../../control-plane/autoscaling/queueing';
import { simulateRequests } from '../../control-plane/autoscaling/request-simulator';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';
import { meanSlotHoldMs, prefillMs, type ServiceModel } from '../../control-plane/autoscaling/service-model';
import { SloAutoscaler, type SloState } from '../../control-plane/autoscaling/slo-autoscaler';
import { DEFAULT_SLO_AUTOSCALER_OPTIONS } from '../../control-plane/autoscaling/slo-autoscaler-options';

const MODEL: ServiceModel = {
  slots: 16, prefillTokensPerSecond: 4_000, decodeTokensPerSecond: 25, prefixHitRate: 0.3,
  meanPromptTokens: 1_100, meanOutputTokens: 230, startupMs: 120_000,
};
const TEXT_SLO = { ttftP95Ms: 2_000, tpotP95Ms: null, queueWaitP95Ms: null };
const HOLD_SECONDS = meanSlotHoldMs(MODEL) / 1000;
const WAIT_BUDGET_SECONDS = (2_000 - 2 * prefillMs(MODEL, MODEL.meanPromptTokens)) / 1000;
const MISS_SHARE = 1 - DEFAULT_SLO_AUTOSCALER_OPTIONS.attainment;
/** What the queueing model alone asks for at a rate. */
const sized = (rate: number, slots = 16, hold = HOLD_SECONDS, budget = WAIT_BUDGET_SECONDS) => replicasForWaitTail(rate, slots, hold, budget, MISS_SHARE, 1_000);

/** One deployment on a manual clock: asks every 5 s and applies each decision at once (ready at once). */
class Deployment {
  now = 0;
  replicas: number;
  readonly state: SloState;
  readonly decisions: ScalingDecision[] = [];

  constructor(readonly policy = new SloAutoscaler(), readonly settings: Partial<ScalingObservation> = {}) {
    this.replicas = settings.currentReplicas ?? 1;
    this.state = policy.newState();
  }

  decide(overrides: Partial<ScalingObservation> = {}): ScalingDecision {
    const decision = this.policy.decide(this.state, {
      deploymentId: 'dep_slo', inFlight: 0, queued: 0, targetConcurrency: 16, minReplicas: 1, maxReplicas: 40, autoscale: true,
      slo: TEXT_SLO, serviceModel: MODEL, arrivalsPerSecond: 0, ...this.settings,
      currentReplicas: this.replicas, readyReplicas: this.replicas, ...overrides,
    }, this.now);
    this.decisions.push(decision);
    this.replicas = decision.desiredReplicas;
    this.now += 5_000;
    return decision;
  }

  /** Decides for `seconds` at the rate `rateAt(now)`, with Little's in flight at the model's hold. */
  run(seconds: number, rateAt: (now: number) => number, overrides: Partial<ScalingObservation> = {}): ScalingDecision[] {
    const made: ScalingDecision[] = [];
    for (const end = this.now + seconds * 1000; this.now < end;) {
      const rate = rateAt(this.now);
      made.push(this.decide({ arrivalsPerSecond: rate, inFlight: Math.min(this.replicas * 16, Math.round(rate * HOLD_SECONDS)), ...overrides }));
    }
    return made;
  }
}

describe('SloAutoscaler sizing', () => {
  it('orders the replicas the queueing model needs for the SLO at the rate now, and says why with the numbers', () => {
    const deployment = new Deployment();
    const decisions = deployment.run(60, () => 8);
    const first = decisions.find((decision) => decision.action === 'scale_up')!;
    expect(first).toMatchObject({ policy: 'slo', reason: 'slo_forecast', movedBy: 'forecast', arrivalsPerSecond: 8, desiredReplicas: sized(8) });
    expect(first.explanation).toContain(`at 8 req/s, ${sized(8)} replicas keep 90 % of waits under ${Math.round(WAIT_BUDGET_SECONDS * 100) / 100} s in an M/M/c queue, for the TTFT SLO of 2000 ms (16 slots a replica and ${Math.round(HOLD_SECONDS * 100) / 100} s a request)`);
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: sized(8), action: 'hold', reason: 'within_tolerance' });
    // 8 req/s × 9.4 s is 75 busy slots: more than the 5 replicas that would hold them at 100 %.
    expect(sized(8)).toBeGreaterThan(Math.ceil((8 * HOLD_SECONDS) / 16));
  });

  it('pre-warms: on a rising rate it orders what the forecast one start-up ahead needs, before the rate gets there', () => {
    const deployment = new Deployment();
    // From 1 req/s, +1 req/s a minute.
    const decisions = deployment.run(10 * 60, (now) => 1 + now / 60_000);
    const preWarm = decisions.filter((decision) => decision.reason === 'pre_warm');
    expect(preWarm.length).toBeGreaterThan(0);
    for (const decision of preWarm) {
      expect(decision.forecastArrivalsPerSecond!).toBeGreaterThan(decision.arrivalsPerSecond! + 1);
      expect(decision.desiredReplicas).toBe(sized(decision.forecastArrivalsPerSecond!));
      expect(decision.desiredReplicas).toBeGreaterThan(sized(decision.arrivalsPerSecond!));
    }
    expect(preWarm[0].explanation).toMatch(/ahead of a predicted rise: the forecast is [\d.]+ req\/s within the 120 s start-up/);
    // Always ahead of the need at the rate now.
    expect(decisions.slice(24).every((decision) => decision.desiredReplicas >= sized(decision.arrivalsPerSecond!))).toBe(true);
  });

  it('does not call a forecast that lags a fall a pre-warm: at zero after a session, it sizes for the forecast without the label', () => {
    const deployment = new Deployment();
    deployment.run(120, () => 3);
    // Load stops and the deployment is scaled to zero (by the wrapper): the forecaster's level decays
    // over several samples and stays above the rate of 0 for minutes.
    const after = deployment.run(10 * 60, () => 0, { currentReplicas: 0, readyReplicas: 0 });
    expect(after.some((decision) => decision.forecastArrivalsPerSecond! > 0.5 && decision.arrivalsPerSecond === 0)).toBe(true);
    expect(after.filter((decision) => decision.reason === 'pre_warm')).toEqual([]);
  });

  it('sizes media for its queue-wait SLO with no prefill allowance', () => {
    const media: ServiceModel = { ...MODEL, slots: 1, prefillTokensPerSecond: 1e9, decodeTokensPerSecond: 7.5, meanPromptTokens: 1, meanOutputTokens: 30 };
    const deployment = new Deployment(new SloAutoscaler(), { slo: { ttftP95Ms: null, tpotP95Ms: null, queueWaitP95Ms: 10_000 }, serviceModel: media, targetConcurrency: 1 });
    const last = deployment.run(60, () => 1, { inFlight: 4 }).at(-1)!;
    expect(last.desiredReplicas).toBe(sized(1, 1, meanSlotHoldMs(media) / 1000, 10));
    expect(last.explanation).toContain('the queue-wait SLO of 10000 ms');
  });

  it('with a time per output token tighter than the full batch gives, batches fewer sequences per replica', () => {
    // 25 tokens/s a sequence at 16 is 40 ms a token; 20 ms allows a batch of 8 (decode time taken to grow with the batch).
    const deployment = new Deployment(new SloAutoscaler(), { slo: { ...TEXT_SLO, tpotP95Ms: 20 } });
    const last = deployment.run(60, () => 4).at(-1)!;
    expect(last.desiredReplicas).toBe(sized(4, 8));
    expect(last.explanation).toContain('8 slots a replica');
  });

  it('without a service model, takes the target concurrency as slots and measures the hold by Little\'s law', () => {
    const deployment = new Deployment(new SloAutoscaler(), { serviceModel: undefined, targetConcurrency: 16 });
    // 3 req/s with 60 in flight: a 20 s hold; prefill unknown, so the whole SLO is the wait budget.
    const last = deployment.run(200, () => 3, { inFlight: 60 }).at(-1)!;
    expect(last.desiredReplicas).toBe(sized(3, 16, 20, 2));
    expect(last.explanation).toContain('measured 16 slots a replica and 20 s a request');
  });
});

describe('SloAutoscaler pressure and scale-down', () => {
  it('reacts at once to a backlog on the engines that would outlast a start-up, and not to one the replicas drain first', () => {
    // 6 req/s on 2 replicas (3.4 req/s of slots): 72 there now, 720 more in the 120 s start-up,
    // 409 served meanwhile, 56 in flight at steady state: 327 too many, drained in 120 s by 2 more.
    const deployment = new Deployment(new SloAutoscaler(), { currentReplicas: 2 });
    const decision = deployment.decide({ arrivalsPerSecond: 6, inFlight: 32, queued: 40 });
    expect(decision).toMatchObject({ reason: 'slo_pressure', movedBy: 'queue', action: 'scale_up', desiredReplicas: sized(6) + 2 });
    expect(decision.explanation).toContain('40 requests wait for a slot on the engines');
    // At 2 req/s the two replicas clear the same 40 well before a third could start.
    expect(new Deployment(new SloAutoscaler(), { currentReplicas: 2 }).decide({ arrivalsPerSecond: 2, inFlight: 32, queued: 40 }).reason).not.toBe('slo_pressure');
    // Four queued is under the threshold of 5: the model decides.
    expect(new Deployment(new SloAutoscaler(), { currentReplicas: 2 }).decide({ arrivalsPerSecond: 6, inFlight: 32, queued: 4 }).reason).not.toBe('slo_pressure');
  });

  it('on a full KV cache, trusts the hold it measures over the model\'s when the model is wrong', () => {
    const deployment = new Deployment(new SloAutoscaler(), { currentReplicas: 2 });
    // 2 req/s with 40 in flight: the requests hold their slots 20 s, not the model's 9.4 s.
    deployment.run(180, () => 2, { inFlight: 30, kvCacheUsage: 0.5 });
    const decision = deployment.decide({ arrivalsPerSecond: 2, inFlight: 40, kvCacheUsage: 0.9 });
    expect(decision).toMatchObject({ reason: 'slo_pressure', movedBy: 'kv_cache' });
    expect(decision.desiredReplicas).toBeGreaterThan(sized(2));
    expect(decision.explanation).toContain("the busiest engine's KV cache is 90 % full");
    // The model right (in flight = rate × its hold): a full cache alone adds nothing.
    const calm = new Deployment(new SloAutoscaler(), { currentReplicas: 2 });
    calm.run(60, () => 2, { kvCacheUsage: 0.9 });
    expect(calm.decisions.every((each) => each.reason !== 'slo_pressure')).toBe(true);
  });

  it('adds a replica when the measured p95 breaks the SLO with none starting, and waits while one starts', () => {
    const deployment = new Deployment(new SloAutoscaler(), { currentReplicas: 3 });
    expect(deployment.decide({ arrivalsPerSecond: 1, inFlight: 9, observedP95Ms: 2_500 })).toMatchObject({ reason: 'slo_pressure', movedBy: 'observed_p95', desiredReplicas: 4 });
    expect(deployment.decide({ arrivalsPerSecond: 1, inFlight: 9, observedP95Ms: 2_500, readyReplicas: 3 })).toMatchObject({ action: 'hold', desiredReplicas: 4 });
  });

  it('scales down only after the need has stayed low for the window, one replica per decision', () => {
    const deployment = new Deployment();
    deployment.run(60, () => 8);
    const high = deployment.replicas;
    const lastHigh = deployment.now - 5_000;
    const quiet = deployment.run(5 * 60, () => 1);
    const firstDown = quiet.find((decision) => decision.action === 'scale_down')!;
    expect(firstDown.at - lastHigh).toBe(DEFAULT_SLO_AUTOSCALER_OPTIONS.scaleDownWindowMs);
    expect(quiet.filter((decision) => decision.at < firstDown.at).every((decision) => decision.reason === 'stabilizing_down' && decision.desiredReplicas === high)).toBe(true);
    const downs = quiet.filter((decision) => decision.action === 'scale_down');
    expect(downs.map((decision) => decision.desiredReplicas)).toEqual(Array.from({ length: high - sized(1) }, (_, index) => high - 1 - index));
    expect(downs.at(-1)!.reason).toBe('scale_down');
    expect(downs[0].explanation).toContain('for the last 60 s the SLO has needed at most');
  });

  it('keeps to the bounds: at most max (saying so), at least max(1, min), pinned with autoscale off', () => {
    expect(new Deployment(new SloAutoscaler(), { maxReplicas: 3 }).run(30, () => 20).at(-1)).toMatchObject({ desiredReplicas: 3, reason: 'at_max' });
    expect(new Deployment(new SloAutoscaler(), { maxReplicas: 8, capacityLimit: 2 }).run(30, () => 20).at(-1)).toMatchObject({ desiredReplicas: 2, reason: 'capped_by_price' });
    expect(new Deployment(new SloAutoscaler(), { minReplicas: 0 }).run(30, () => 0).at(-1)).toMatchObject({ desiredReplicas: 1, reason: 'at_min' });
    expect(new Deployment(new SloAutoscaler(), { minReplicas: 2, autoscale: false }).run(30, () => 20).at(-1)).toMatchObject({ desiredReplicas: 2, reason: 'autoscale_off' });
  });

  it('refuses bad options naming the option, and a clock that runs backwards', () => {
    expect(() => new SloAutoscaler({ attainment: 1 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'attainment' }));
    expect(() => new SloAutoscaler({ scaleDownWindowMs: -1 })).toThrow(expect.objectContaining({ param: 'scaleDownWindowMs' }));
    expect(() => new SloAutoscaler({ seasonMs: 1_000 })).toThrow(expect.objectContaining({ param: 'seasonMs' }));
    expect(() => new SloAutoscaler({ kvPressureThreshold: 0 })).toThrow(expect.objectContaining({ param: 'kvPressureThreshold' }));
    expect(new SloAutoscaler({ attainment: undefined }).options).toEqual(DEFAULT_SLO_AUTOSCALER_OPTIONS);
    const deployment = new Deployment();
    deployment.decide();
    deployment.now = -1;
    expect(() => deployment.decide()).toThrow(expect.objectContaining({ code: 'internal_error' }));
  });
});

describe('SloAutoscaler in the request simulator', () => {
  it('holds the SLO for 99 % of requests on a ramp a start-up cannot outrun, and loses nothing', () => {
    // 0.5 → 6 req/s over 30 minutes and back: about 5 replicas of need at the top.
    const trace = requestTrace('ramp', rampTrace({ from: 0.5, to: 6, holdSeconds: 300, rampSeconds: 1_800 }), CHAT_LENGTHS, 9);
    const result = simulateRequests({
      trace, policy: new SloAutoscaler(), model: MODEL, slo: TEXT_SLO, targetConcurrency: 16, minReplicas: 1, maxReplicas: 12,
      startupJitterMs: 10_000, startupSeed: 9,
    });
    expect(result.withinSloShare).toBeGreaterThanOrEqual(0.99);
    expect(result).toMatchObject({ requestsLost: 0, requestsRefused: 0 });
    expect(result.decisions.every((decision) => decision.policy === 'slo' && decision.explanation.length > 0)).toBe(true);
    expect(result.peakReplicas).toBeLessThanOrEqual(sized(6) + 1);
  });
});
