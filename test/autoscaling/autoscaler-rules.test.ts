import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { DEFAULT_AUTOSCALER_OPTIONS } from '../../control-plane/autoscaling/autoscaler-options';
import type { ScalingPolicy } from '../../control-plane/autoscaling/scaling-policy';
import { newScalingState, type ScalingState } from '../../control-plane/autoscaling/scaling-state';
import { AppError } from '../../control-plane/errors/app-error';
import { observation, SimulatedDeployment } from './simulated-clock';

const SECOND = 1_000;
const constant = (load: number) => () => load;

describe('Autoscaler bounds', () => {
  it('never goes below 1, even with minReplicas 0 and no load, and says the minimum held it', () => {
    const autoscaler = new Autoscaler();
    const decision = autoscaler.decide(newScalingState(), observation({ minReplicas: 0, currentReplicas: 0, readyReplicas: 0 }), 0);
    expect(decision).toMatchObject({ desiredReplicas: 1, wantedReplicas: 0, action: 'scale_up', reason: 'at_min' });
    expect(decision.explanation).toContain('never fewer than 1');

    const idle = new SimulatedDeployment(autoscaler, { minReplicas: 0 });
    const decisions = idle.run(15 * 60 * SECOND, constant(0));
    expect(Math.min(...decisions.map((each) => each.desiredReplicas))).toBe(1);
    expect(decisions.at(-1)).toMatchObject({ action: 'hold', reason: 'at_min' });
  });

  it('scales down to minReplicas and no further, holding there with at_min', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { minReplicas: 3, currentReplicas: 6 });
    const decisions = deployment.run(10 * 60 * SECOND, constant(0));
    expect(Math.min(...decisions.map((each) => each.desiredReplicas))).toBe(3);
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 3, action: 'hold', reason: 'at_min' });
  });

  it('never goes above maxReplicas; holds there with at_max and the wanted count recorded', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { maxReplicas: 5 });
    const decisions = deployment.run(60 * SECOND, constant(1_000));
    expect(Math.max(...decisions.map((each) => each.desiredReplicas))).toBe(5);
    expect(decisions.at(-1)).toMatchObject({ desiredReplicas: 5, wantedReplicas: 100, action: 'hold', reason: 'at_max' });
    expect(decisions.at(-1)!.explanation).toContain('the maximum is 5');
  });

  it('applies a lowered maxReplicas at once, without waiting for the scale-down window or stepping', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { currentReplicas: 8 });
    deployment.run(30 * SECOND, constant(80));
    const decision = deployment.decideNow(80, { maxReplicas: 4 });
    expect(decision).toMatchObject({ currentReplicas: 8, desiredReplicas: 4, action: 'scale_down', reason: 'at_max' });
  });

  it('with autoscale off, pins the deployment at minReplicas whatever the load, and says so', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { autoscale: false, minReplicas: 2, currentReplicas: 5 });
    const [first, ...rest] = deployment.run(5 * 60 * SECOND, constant(500));
    expect(first).toMatchObject({ currentReplicas: 5, desiredReplicas: 2, wantedReplicas: 50, action: 'scale_down', reason: 'autoscale_off' });
    expect(rest.every((decision) => decision.desiredReplicas === 2 && decision.reason === 'autoscale_off')).toBe(true);
    expect(first.explanation).toMatch(/autoscale is off.*minimum of 2 replicas.*asks for 50 replicas/);
  });

  it('stays under what placement can get under the price cap, and names the cap as the reason', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { capacityLimit: 3 });
    const capped = deployment.run(60 * SECOND, constant(80));
    expect(Math.max(...capped.map((decision) => decision.desiredReplicas))).toBe(3);
    expect(capped.at(-1)).toMatchObject({ desiredReplicas: 3, wantedReplicas: 8, reason: 'capped_by_price', capacityLimit: 3 });
    expect(capped.at(-1)!.explanation).toContain('at most 3 replicas under the price cap');

    // The cap lifts (a cheaper offer appeared): straight on to the load's 8.
    const lifted = deployment.run(30 * SECOND, constant(80), { capacityLimit: null });
    expect(lifted.at(-1)).toMatchObject({ desiredReplicas: 8, reason: 'within_tolerance' });
    // Placement can now hold only 5 of the 8: the cap is a hard bound like maxReplicas.
    expect(deployment.decideNow(80, { capacityLimit: 5 })).toMatchObject({ desiredReplicas: 5, action: 'scale_down', reason: 'capped_by_price' });
  });

  it('keeps minReplicas when the price cap allows fewer (the floor wins)', () => {
    const decision = new Autoscaler().decide(newScalingState(), observation({ minReplicas: 2, currentReplicas: 2, inFlight: 50, capacityLimit: 1 }), 0);
    expect(decision).toMatchObject({ desiredReplicas: 2, reason: 'capped_by_price', action: 'hold' });
  });
});

describe('Autoscaler signal and dead band', () => {
  it('smooths in-flight plus queued over windowMs (a window ending now, excluding its start)', () => {
    const deployment = new SimulatedDeployment(new Autoscaler({ windowMs: 10 * SECOND }));
    const loads = [0, 0, 30, 0, 0];
    const signals = loads.map((load) => { const decision = deployment.decideNow(load); deployment.now += 5 * SECOND; return decision.signal; });
    // Samples 5 s apart: a 10 s window holds this one and the previous one.
    expect(signals).toEqual([0, 0, 15, 15, 0]);
    const withQueue = deployment.decideNow(4, { queued: 16 });
    expect(withQueue).toMatchObject({ inFlight: 4, queued: 16, signal: 10 });
  });

  it('holds inside the tolerance band on both sides, and leaves it as soon as load is outside', () => {
    const settings = { currentReplicas: 20, maxReplicas: 30, targetConcurrency: 10 };
    const decide = (load: number) => new Autoscaler().decide(newScalingState(), observation({ ...settings, inFlight: load }), 0);
    // +7.5 % and -7.5 % per replica: the load alone would ask for 22 and 19 replicas.
    expect(decide(215)).toMatchObject({ wantedReplicas: 22, recommendedReplicas: 20, desiredReplicas: 20, reason: 'within_tolerance' });
    expect(decide(185)).toMatchObject({ wantedReplicas: 19, recommendedReplicas: 20, desiredReplicas: 20, reason: 'within_tolerance' });
    expect(decide(215).explanation).toContain('10.8 per replica is within 10 % above the target of 10, not worth a replica');
    // +12.5 %: out of the band, straight to what the load needs.
    expect(decide(225)).toMatchObject({ wantedReplicas: 23, desiredReplicas: 23, action: 'scale_up', reason: 'scale_up' });
    expect(decide(200)).toMatchObject({ wantedReplicas: 20, desiredReplicas: 20, reason: 'within_tolerance' });
    // No dead band: the same +7.5 % scales up.
    expect(new Autoscaler({ tolerance: 0 }).decide(newScalingState(), observation({ ...settings, inFlight: 215 }), 0))
      .toMatchObject({ desiredReplicas: 22, reason: 'scale_up' });
  });

  it('scales down only as far as leaves the tolerance of headroom, so a rising load does not bring a replica straight back', () => {
    const decide = (inFlight: number) => new Autoscaler({ scaleDownStabilizationMs: 0 })
      .decide(newScalingState(), observation({ currentReplicas: 5, inFlight }), 0);
    // 40 fits 4 replicas exactly; 4 would be full, so 5 stay.
    const full = decide(40);
    expect(full).toMatchObject({ wantedReplicas: 4, recommendedReplicas: 5, desiredReplicas: 5, reason: 'within_tolerance' });
    expect(full.explanation).toContain('4 would run 10 per replica, over the 9 (10 % under the target of 10) that a scale-down must leave');
    // 36 is 9 per replica on 4: the lower edge of the band, so 4 it is.
    expect(decide(36)).toMatchObject({ wantedReplicas: 4, recommendedReplicas: 4, desiredReplicas: 4, reason: 'scale_down' });
  });

  it('asks for ceil(signal / target): 96 at 32 per replica is 3 replicas, 97 is 4', () => {
    const decide = (inFlight: number) => new Autoscaler({ tolerance: 0 })
      .decide(newScalingState(), observation({ targetConcurrency: 32, currentReplicas: 3, inFlight }), 0).wantedReplicas;
    expect([decide(96), decide(97), decide(64), decide(65)]).toEqual([3, 4, 2, 3]);
  });
});

describe('Autoscaler stabilisation windows', () => {
  it('does not scale down before scaleDownStabilizationMs of lower recommendations, then steps down one at a time', () => {
    const deployment = new SimulatedDeployment(new Autoscaler());
    const busy = deployment.run(2 * 60 * SECOND, constant(80));
    expect(busy.at(-1)!.desiredReplicas).toBe(8);
    const quiet = deployment.run(10 * 60 * SECOND, constant(9));
    const lastAskingForEight = deployment.decisions.filter((decision) => decision.recommendedReplicas >= 8).at(-1)!.at;
    const firstDown = quiet.find((decision) => decision.action === 'scale_down')!;
    // The window is (now - 300 s, now]: the first decision that no longer sees an 8 is 300 s later.
    expect(firstDown.at - lastAskingForEight).toBe(DEFAULT_AUTOSCALER_OPTIONS.scaleDownStabilizationMs);
    const before = quiet.filter((decision) => decision.at < firstDown.at);
    expect(before.every((decision) => decision.desiredReplicas === 8)).toBe(true);
    expect(before.filter((decision) => decision.recommendedReplicas < 8).every((decision) => decision.reason === 'stabilizing_down')).toBe(true);
    expect(before.at(-1)!.explanation).toContain('waits until the load has stayed low for 300 s (highest need in that window: 8)');
    // 8 → 1, one replica per decision: 7 decisions, the last one reaching the need exactly.
    const downs = quiet.filter((decision) => decision.action === 'scale_down');
    expect(downs.map((decision) => decision.desiredReplicas)).toEqual([7, 6, 5, 4, 3, 2, 1]);
    expect(downs.map((decision) => decision.reason)).toEqual([...Array(6).fill('step_limited'), 'scale_down']);
    expect(downs.at(-1)!.at - firstDown.at).toBe(6 * 5 * SECOND);
  });

  it('scales up on the first recommendation by default', () => {
    const deployment = new SimulatedDeployment(new Autoscaler({ windowMs: 1 }));
    expect(deployment.decideNow(30)).toMatchObject({ desiredReplicas: 3, action: 'scale_up', reason: 'scale_up' });
  });

  it('with scaleUpStabilizationMs, ignores a spike shorter than the window and follows a sustained rise', () => {
    const deployment = new SimulatedDeployment(new Autoscaler({ windowMs: 1, scaleUpStabilizationMs: 30 * SECOND }));
    deployment.run(60 * SECOND, constant(5));
    const spike = deployment.run(25 * SECOND, constant(50));
    expect(spike.every((decision) => decision.desiredReplicas === 1 && decision.reason === 'stabilizing_up')).toBe(true);
    deployment.run(60 * SECOND, constant(5));
    const rise = deployment.run(60 * SECOND, constant(50));
    const firstUp = rise.find((decision) => decision.action === 'scale_up')!;
    // Only once the window (now - 30 s, now] holds nothing but the rise: at +25 s it holds the
    // six recommendations of +0 … +25 s, and the spike of 25 s above had one fewer.
    expect(firstUp.at - rise[0].at).toBe(25 * SECOND);
    expect(firstUp.desiredReplicas).toBe(5);
  });

  it('after a restart with empty memory, does not scale down before a whole scale-down window', () => {
    const deployment = new SimulatedDeployment(new Autoscaler(), { currentReplicas: 8 });
    const decisions = deployment.run(6 * 60 * SECOND, constant(0));
    const firstDown = decisions.find((decision) => decision.action === 'scale_down')!;
    expect(firstDown.at).toBe(DEFAULT_AUTOSCALER_OPTIONS.scaleDownStabilizationMs);
    expect(decisions.filter((decision) => decision.at < firstDown.at).every((decision) => decision.reason === 'stabilizing_down')).toBe(true);
  });
});

describe('Autoscaler step limits', () => {
  it('adds at most +maxScaleUpStep or ×maxScaleUpFactor per decision, whichever is more', () => {
    const deployment = new SimulatedDeployment(new Autoscaler({ windowMs: 1 }), { maxReplicas: 40 });
    const decisions = deployment.run(30 * SECOND, constant(300));
    expect(decisions.map((decision) => decision.desiredReplicas).slice(0, 5)).toEqual([5, 10, 20, 30, 30]);
    expect(decisions.map((decision) => decision.reason).slice(0, 5)).toEqual(['step_limited', 'step_limited', 'step_limited', 'scale_up', 'within_tolerance']);
    expect(decisions[0].explanation).toMatch(/^Scaling up from 1 to 5 replicas, the most one decision adds \(\+4 or ×2\)/);
  });

  it('removes at most maxScaleDownStep per decision', () => {
    const deployment = new SimulatedDeployment(new Autoscaler({ windowMs: 1, scaleDownStabilizationMs: 0, maxScaleDownStep: 3 }), { currentReplicas: 10 });
    const decisions = deployment.run(20 * SECOND, constant(0));
    expect(decisions.map((decision) => decision.desiredReplicas)).toEqual([7, 4, 1, 1]);
  });
});

describe('Autoscaler decisions', () => {
  it('records every input it decided from', () => {
    const input = observation({ inFlight: 37, queued: 5, currentReplicas: 3, readyReplicas: 2, minReplicas: 2, maxReplicas: 9, capacityLimit: 7 });
    const decision = new Autoscaler().decide(newScalingState(), input, 1_700_000_000_000);
    expect(decision).toEqual({
      deploymentId: 'dep_test', at: 1_700_000_000_000, action: 'scale_up', reason: 'scale_up', explanation: expect.any(String),
      desiredReplicas: 5, currentReplicas: 3, readyReplicas: 2, wantedReplicas: 5, recommendedReplicas: 5, signal: 42, perReplicaLoad: 14,
      targetConcurrency: 10, inFlight: 37, queued: 5, minReplicas: 2, maxReplicas: 9, autoscale: true, capacityLimit: 7,
      policy: 'concurrency', movedBy: 'in_flight',
    });
    expect(decision.explanation).toBe('Scaling up from 3 to 5 replicas: the load asks for 5 replicas at 10 per replica (42 requests in flight or queued, mean of 10 s).');
  });

  it('is the `concurrency` scaling policy: a fresh state per deployment, and every decision names the policy and its signal', () => {
    const policy: ScalingPolicy<ScalingState> = new Autoscaler();
    expect(policy.name).toBe('concurrency');
    expect(policy.newState()).toEqual(newScalingState());
    expect(policy.decide(policy.newState(), observation({ inFlight: 30 }), 0)).toMatchObject({ policy: 'concurrency', movedBy: 'in_flight', desiredReplicas: 3 });
  });

  it('refuses a clock that runs backwards and an observation that cannot be right, as internal errors', () => {
    const autoscaler = new Autoscaler();
    const state = newScalingState();
    autoscaler.decide(state, observation(), 10_000);
    expect(() => autoscaler.decide(state, observation(), 9_999)).toThrow(expect.objectContaining({ code: 'internal_error' }));
    for (const bad of [{ targetConcurrency: 0 }, { inFlight: -1 }, { minReplicas: 5, maxReplicas: 4 }, { readyReplicas: 2, currentReplicas: 1 }, { capacityLimit: 1.5 }]) {
      expect(() => autoscaler.decide(newScalingState(), observation(bad), 0)).toThrow(AppError);
    }
  });

  it('refuses invalid options, naming the option', () => {
    expect(() => new Autoscaler({ tolerance: 1 })).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'tolerance' }));
    expect(() => new Autoscaler({ maxScaleDownStep: 0 })).toThrow(expect.objectContaining({ param: 'maxScaleDownStep' }));
    expect(new Autoscaler({ windowMs: undefined }).options).toEqual(DEFAULT_AUTOSCALER_OPTIONS);
    expect(Object.isFrozen(new Autoscaler().options)).toBe(true);
  });
});
