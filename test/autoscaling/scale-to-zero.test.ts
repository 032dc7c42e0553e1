import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { withScaleToZero } from '../../control-plane/autoscaling/scale-to-zero';
import type { ScalingDecision } from '../../control-plane/autoscaling/scaling-decision';
import type { ScalingObservation } from '../../control-plane/autoscaling/scaling-observation';
import type { ScalingPolicy } from '../../control-plane/autoscaling/scaling-policy';
import { observation } from './simulated-clock';

const SECOND = 1_000;
/** Scale to zero after a minute without requests. */
const AFTER = 60 * SECOND;

/** One deployment on a manual clock, deciding with the concurrency policy wrapped, applying each decision at once. */
function deployment(settings: Partial<ScalingObservation> = {}) {
  const policy = withScaleToZero(new Autoscaler({ scaleDownStabilizationMs: 30 * SECOND }));
  const state = policy.newState();
  let now = 0;
  let current = settings.currentReplicas ?? 1;
  return {
    policy,
    get current() {
      return current;
    },
    decide(at: number, overrides: Partial<ScalingObservation> = {}): ScalingDecision {
      now = at;
      const decision = policy.decide(state, observation({ scaleToZeroAfterMs: AFTER, ...settings, currentReplicas: current, readyReplicas: current, ...overrides }), now);
      current = decision.desiredReplicas;
      return decision;
    },
  };
}

describe('withScaleToZero', () => {
  it('keeps the policy\'s name and state', () => {
    const inner = new Autoscaler();
    const wrapped = withScaleToZero(inner);
    expect(wrapped.name).toBe('concurrency');
    expect(wrapped.newState()).toEqual(inner.newState());
  });

  it('gives every replica back once the deployment has had no request for scaleToZeroAfterMs and nothing runs or waits', () => {
    const subject = deployment({ currentReplicas: 2 });
    expect(subject.decide(0, { idleMs: AFTER - 1 })).toMatchObject({ desiredReplicas: 2, reason: expect.not.stringMatching(/scale_to_zero/) });
    const down = subject.decide(5 * SECOND, { idleMs: AFTER });
    expect(down).toMatchObject({ action: 'scale_down', reason: 'scale_to_zero', desiredReplicas: 0, currentReplicas: 2, movedBy: 'idle' });
    expect(down.explanation).toBe('Scaling down from 2 to 0 replicas: no request for 60 s (scale to zero after 60 s), and none in flight, queued or waiting.');
  });

  it('does not scale to zero while anything is in flight, queued or waiting, however long since the last arrival', () => {
    for (const busy of [{ inFlight: 1 }, { queued: 1 }, { waitingForReplica: 1 }]) {
      const decision = deployment().decide(0, { idleMs: 10 * AFTER, ...busy });
      expect(decision.desiredReplicas).toBeGreaterThanOrEqual(1);
      expect(decision.reason).not.toBe('scale_to_zero');
    }
  });

  it('never scales to zero without the setting, or when idleness is unknown: the policy\'s floor of max(1, min) holds', () => {
    expect(deployment({ scaleToZeroAfterMs: null }).decide(0, { idleMs: 10 * AFTER })).toMatchObject({ desiredReplicas: 1, reason: 'at_min' });
    expect(deployment({ scaleToZeroAfterMs: undefined, minReplicas: 0 }).decide(0, { idleMs: 10 * AFTER })).toMatchObject({ desiredReplicas: 1, reason: 'at_min' });
    expect(deployment().decide(0, { idleMs: null })).toMatchObject({ desiredReplicas: 1 });
    // Without the setting a deployment found at 0 (its replica lost) is brought back to its floor.
    expect(deployment({ scaleToZeroAfterMs: null, currentReplicas: 0 }).decide(0)).toMatchObject({ desiredReplicas: 1, reason: 'at_min', action: 'scale_up' });
  });

  it('stays at zero while nothing waits', () => {
    const subject = deployment({ currentReplicas: 0 });
    const hold = subject.decide(0, { idleMs: 5 * AFTER });
    expect(hold).toMatchObject({ action: 'hold', reason: 'scale_to_zero', desiredReplicas: 0, currentReplicas: 0 });
    expect(hold.explanation).toBe('Holding 0 replicas: scaled to zero, and no request waits; the next one starts a replica (last request 300 s ago).');
    // Not idle long (the last waiter gave up before the loop saw it): still no replica for nobody.
    expect(subject.decide(5 * SECOND, { idleMs: 1 })).toMatchObject({ desiredReplicas: 0, reason: 'scale_to_zero' });
  });

  it('lets the forecaster pre-warm from zero, ahead of a predicted rise, and nothing else', () => {
    const ordering = (reason: ScalingDecision['reason']): ScalingPolicy<null> => ({
      name: 'slo', newState: () => null,
      decide: (_state, seen, at) => ({ ...new Autoscaler().decide(new Autoscaler().newState(), seen, at), policy: 'slo', reason, desiredReplicas: 2, action: 'scale_up', movedBy: 'forecast' }),
    });
    const atZero = observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 0, readyReplicas: 0, idleMs: 5 * AFTER });
    expect(withScaleToZero(ordering('pre_warm')).decide(null, atZero, 0)).toMatchObject({ reason: 'pre_warm', desiredReplicas: 2 });
    expect(withScaleToZero(ordering('slo_forecast')).decide(null, atZero, 0)).toMatchObject({ reason: 'scale_to_zero', desiredReplicas: 0 });
  });

  it('starts a replica at once when a request waits at zero (cold start), past the scale-up window', () => {
    const subject = withScaleToZero(new Autoscaler({ scaleUpStabilizationMs: 60 * SECOND }));
    const state = subject.newState();
    const decision = subject.decide(state, observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 0, readyReplicas: 0, waitingForReplica: 3, idleMs: 0 }), 0);
    expect(decision).toMatchObject({ action: 'scale_up', reason: 'cold_start', desiredReplicas: 1, currentReplicas: 0, movedBy: 'waiting' });
    expect(decision.explanation).toBe('Scaling up from 0 to 1 replica at once (cold start): 3 requests waiting at the gateways for a replica.');
  });

  it('treats queued media work at zero as waiting (the async queue is demand too)', () => {
    const decision = deployment({ currentReplicas: 0, targetConcurrency: 1 }).decide(0, { queued: 1, idleMs: 0 });
    expect(decision).toMatchObject({ reason: 'cold_start', desiredReplicas: 1, movedBy: 'queue' });
    expect(decision.explanation).toContain('1 request queued');
  });

  it('takes what the policy wants when that is more than one, within the maximum', () => {
    // Autoscale on, minReplicas 3: a cold start goes to the floor of 3, not 1.
    expect(deployment({ currentReplicas: 0, minReplicas: 3 }).decide(0, { waitingForReplica: 1 })).toMatchObject({ reason: 'cold_start', desiredReplicas: 3 });
    // Autoscale off pins the count at min while there is traffic; the opt-in still goes to zero and back.
    const pinned = deployment({ autoscale: false, minReplicas: 2, currentReplicas: 2 });
    expect(pinned.decide(0, { idleMs: AFTER })).toMatchObject({ reason: 'scale_to_zero', desiredReplicas: 0 });
    expect(pinned.decide(5 * SECOND, { waitingForReplica: 1 })).toMatchObject({ reason: 'cold_start', desiredReplicas: 2 });
  });

  it('goes zero → cold start → serving → zero again over a day of sparse requests', () => {
    const subject = deployment({ currentReplicas: 1 });
    const reasons: string[] = [];
    let lastArrival = 0;
    // One request at t = 0 and one at t = 10 min; the loop decides every 5 s.
    for (let at = 0; at <= 20 * 60 * SECOND; at += 5 * SECOND) {
      const arriving = at === 10 * 60 * SECOND;
      if (arriving) lastArrival = at;
      const waiting = arriving && subject.current === 0 ? 1 : 0;
      const decision = subject.decide(at, { idleMs: at - lastArrival, waitingForReplica: waiting, inFlight: arriving && !waiting ? 1 : 0 });
      if (reasons.at(-1) !== decision.reason) reasons.push(decision.reason);
    }
    expect(reasons).toEqual(['at_min', 'scale_to_zero', 'cold_start', 'at_min', 'scale_to_zero']);
  });

  it('asks the wrapped policy on every observation, at zero too, so its windows see the whole history', () => {
    const seen: number[] = [];
    const inner = new Autoscaler();
    const counting: ScalingPolicy<ReturnType<Autoscaler['newState']>> = {
      name: inner.name, newState: () => inner.newState(),
      decide: (state, observed, now) => {
        seen.push(observed.currentReplicas);
        return inner.decide(state, observed, now);
      },
    };
    const wrapped = withScaleToZero(counting);
    const state = wrapped.newState();
    wrapped.decide(state, observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 1, idleMs: AFTER }), 0);
    wrapped.decide(state, observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 0, readyReplicas: 0, idleMs: AFTER }), 5 * SECOND);
    expect(seen).toEqual([1, 0]);
  });
});
