import { Autoscaler } from '../../control-plane/autoscaling/autoscaler';
import { SloAutoscaler } from '../../control-plane/autoscaling/slo-autoscaler';
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
    expect(wrapped.newState()).toEqual({ policy: inner.newState(), preWarmedAt: null, wastedAfterArrivalAt: null });
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

  /** A policy that orders 2 replicas for `reason` with a forecast of `rate` requests per second. */
  const ordering = (reason: ScalingDecision['reason'], rate: number): ScalingPolicy<null> => ({
    name: 'slo', newState: () => null,
    decide: (_state, seen, at) => ({
      ...new Autoscaler().decide(new Autoscaler().newState(), seen, at), policy: 'slo', reason, desiredReplicas: 2, action: 'scale_up',
      movedBy: 'forecast', forecastArrivalsPerSecond: rate,
    }),
  });
  const atZero = observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 0, readyReplicas: 0, idleMs: 5 * AFTER });

  it('lets the forecaster pre-warm one replica from zero when it expects a request within scaleToZeroAfterMs, and nothing else', () => {
    const policy = withScaleToZero(ordering('pre_warm', 0.5));
    const warm = policy.decide(policy.newState(), atZero, 0);
    expect(warm).toMatchObject({ action: 'scale_up', reason: 'pre_warm', desiredReplicas: 1, movedBy: 'forecast' });
    expect(warm.explanation).toBe('Pre-warming 1 replica from 0 ahead of a predicted rise: the forecast is 0.5 req/s, about 30 requests within the 60 s a replica is kept without one; more follow if they come.');
    // 0.01 req/s expects 0.6 requests in the 60 s a replica would be kept idle: not worth a start-up.
    const faint = withScaleToZero(ordering('pre_warm', 0.01));
    expect(faint.decide(faint.newState(), atZero, 0)).toMatchObject({ reason: 'scale_to_zero', desiredReplicas: 0 });
    const sized = withScaleToZero(ordering('slo_forecast', 5));
    expect(sized.decide(sized.newState(), atZero, 0)).toMatchObject({ reason: 'scale_to_zero', desiredReplicas: 0 });
  });

  it('gives a pre-warmed replica scaleToZeroAfterMs to see a request before the idle rule takes it back', () => {
    const policy = withScaleToZero(ordering('pre_warm', 0.5));
    const state = policy.newState();
    expect(policy.decide(state, atZero, 0).desiredReplicas).toBe(1);
    const warmed = (at: number) => policy.decide(state, observation({ scaleToZeroAfterMs: AFTER, currentReplicas: 1, readyReplicas: 1, idleMs: 5 * AFTER + at }), at);
    expect(warmed(AFTER - 1).reason).not.toBe('scale_to_zero');
    const down = warmed(AFTER);
    expect(down).toMatchObject({ action: 'scale_down', reason: 'scale_to_zero', desiredReplicas: 0 });
    expect(down.explanation).toBe('Scaling down from 1 to 0 replicas: no request for 60 s since the pre-warm (scale to zero after 60 s), and none in flight, queued or waiting.');
    // Back at zero, the grace is spent, and the forecast that bought it is not trusted again until a request comes.
    expect(state.preWarmedAt).toBeNull();
    const later = (at: number, idleMs: number) => policy.decide(state, { ...atZero, idleMs }, at);
    expect(later(AFTER + 5 * SECOND, 5 * AFTER + AFTER + 5 * SECOND)).toMatchObject({ reason: 'scale_to_zero', desiredReplicas: 0 });
    expect(later(AFTER + 10 * SECOND, 2 * SECOND)).toMatchObject({ reason: 'pre_warm', desiredReplicas: 1 });
  });

  it('does not start and stop replicas over and over after a session ends (the slo policy\'s decaying forecast)', () => {
    // 3 req/s for two minutes, then nothing for an hour; the loop looks every 2 s and replicas are ready at once.
    const policy = withScaleToZero(new SloAutoscaler());
    const state = policy.newState();
    const session = 120 * SECOND;
    let current = 1;
    let starts = 0;
    const shapes: string[] = [];
    for (let at = 0; at <= 60 * 60 * SECOND; at += 2 * SECOND) {
      const busy = at < session;
      const decision = policy.decide(state, observation({
        scaleToZeroAfterMs: AFTER, currentReplicas: current, readyReplicas: current, targetConcurrency: 32,
        slo: { ttftP95Ms: 2_000, tpotP95Ms: null, queueWaitP95Ms: null },
        arrivalsPerSecond: busy ? 3 : 0, inFlight: busy ? 3 : 0, idleMs: busy ? 0 : at - session,
      }), at);
      starts += Math.max(0, decision.desiredReplicas - current);
      if (shapes.at(-1) !== decision.reason) shapes.push(decision.reason);
      current = decision.desiredReplicas;
    }
    expect(current).toBe(0);
    // Down to zero a minute after the session, then at most one pre-warmed replica while the forecast decays.
    expect(shapes.filter((reason) => reason === 'pre_warm').length).toBeLessThanOrEqual(1);
    expect(starts).toBeLessThanOrEqual(2);
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
