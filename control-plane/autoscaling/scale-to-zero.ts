import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicy } from './scaling-policy';

/** The wrapped policy's memory, and when scale to zero last pre-warmed a replica from zero. */
export interface ScaleToZeroState<State> {
  readonly policy: State;
  /** When a pre-warm from zero was let through (its replica is not given back before it could serve); null otherwise. */
  preWarmedAt: number | null;
  /** The last arrival before a pre-warmed replica was given back unused: no pre-warm again until a request comes after it. */
  wastedAfterArrivalAt: number | null;
}

/**
 * Scale to zero for any policy (issue 39). The API contract keeps `minReplicas` at 1 or more
 * (docs/scaling-settings.md), so zero is a separate opt-in: `scaleToZeroAfterMs` (the deployment's `scaleToZeroAfterSeconds`). With it
 * set, on top of what `policy` decides:
 * - replicas > 0, no request for `scaleToZeroAfterMs`, nothing in flight, queued or waiting:
 *   every replica is given back (`scale_to_zero`, moved by `idle`);
 * - 0 replicas and requests waiting for one (at a gateway's cold-start queue, or media queued):
 *   max(1, what the policy wants) at once, past any window or step (`cold_start`, moved by
 *   `waiting` or `queue`);
 * - 0 replicas, nothing waiting, and the policy pre-warms: one replica, but only when its forecast
 *   expects at least one request within `scaleToZeroAfterMs` (a replica that would see none is
 *   given back unused by the idle rule), and that replica then gets `scaleToZeroAfterMs` to see
 *   one before the idle rule applies to it; a pre-warm that saw no request is not repeated
 *   until a request comes;
 * - 0 replicas otherwise: 0 stays (`scale_to_zero`, a hold).
 * Anything else, and every deployment without the setting, is the policy's (whose floor is
 * max(1, min)). The policy decides on every observation all the same, so its windows stay
 * continuous across a stay at zero. Autoscale off does not stop it: the setting is its own
 * opt-in, and "off" pins the count while there is traffic.
 *
 * Why the pre-warm rules: a Holt-Winters level decays over several samples after a session
 * ends, so a forecast stays above zero for minutes after the last request. Letting every such
 * forecast through, at the size it asked for, while the idle rule gave the replicas back on the
 * next look, started and stopped replicas every few seconds (bench:autoscaler-replay, sparse:
 * 104 replica starts for 2 cold starts). The `slo` policy now calls only a rising forecast a
 * pre-warm, and these rules bound what any policy's forecast can cost at zero: one replica for
 * `scaleToZeroAfterMs` (plus its start-up) per idle stretch.
 */
export function withScaleToZero<State>(policy: ScalingPolicy<State>): ScalingPolicy<ScaleToZeroState<State>> {
  return {
    name: policy.name,
    newState: () => ({ policy: policy.newState(), preWarmedAt: null, wastedAfterArrivalAt: null }),
    decide(state, observation, now) {
      const decided = policy.decide(state.policy, observation, now);
      const decision = scaleToZero(decided, observation, state, now);
      if (decision === null) return decided;
      if (decision.desiredReplicas === 0 && observation.currentReplicas > 0) {
        // Given back: unused when no request came after the pre-warm (the idle time runs from before it).
        const lastArrivalAt = now - (observation.idleMs ?? 0);
        if (state.preWarmedAt !== null && lastArrivalAt <= state.preWarmedAt) state.wastedAfterArrivalAt = lastArrivalAt;
        state.preWarmedAt = null;
      } else if (decision.reason === 'pre_warm' && observation.currentReplicas === 0) {
        state.preWarmedAt = now;
      }
      return decision;
    },
  };
}

/** The decision scale to zero makes instead of `decided`, or null when it leaves it to the policy. */
function scaleToZero(decided: ScalingDecision, observation: ScalingObservation, state: ScaleToZeroState<unknown>, now: number): ScalingDecision | null {
  const after = observation.scaleToZeroAfterMs;
  if (after === null || after === undefined) return null;
  const { currentReplicas: current, inFlight, queued } = observation;
  const waiting = observation.waitingForReplica ?? 0;
  const idleMs = observation.idleMs ?? null;
  if (current === 0) {
    if (waiting > 0 || queued > 0) {
      const desired = Math.max(1, decided.desiredReplicas);
      const who = [waiting > 0 && requests(waiting, 'waiting at the gateways'), queued > 0 && requests(queued, 'queued')].filter(Boolean).join(', ');
      return {
        ...decided, action: 'scale_up', reason: 'cold_start', desiredReplicas: desired, movedBy: waiting > 0 ? 'waiting' : 'queue',
        explanation: `Scaling up from 0 to ${replicas(desired)} at once (cold start): ${who} for a replica.`,
      };
    }
    const expected = (decided.forecastArrivalsPerSecond ?? 0) * (after / 1000);
    const arrivedSinceWaste = state.wastedAfterArrivalAt === null || (idleMs !== null && now - idleMs > state.wastedAfterArrivalAt);
    if (decided.reason === 'pre_warm' && decided.desiredReplicas > 0 && expected >= 1 && arrivedSinceWaste) {
      return {
        ...decided, action: 'scale_up', desiredReplicas: 1, movedBy: 'forecast',
        explanation: `Pre-warming 1 replica from 0 ahead of a predicted rise: the forecast is ${round(decided.forecastArrivalsPerSecond ?? 0)} req/s, `
          + `about ${Math.round(expected)} requests within the ${seconds(after)} a replica is kept without one; more follow if they come.`,
      };
    }
    return {
      ...decided, action: 'hold', reason: 'scale_to_zero', desiredReplicas: 0, movedBy: 'idle',
      explanation: `Holding 0 replicas: scaled to zero, and no request waits; the next one starts a replica${idleMs === null ? '' : ` (last request ${seconds(idleMs)} ago)`}.`,
    };
  }
  // A pre-warmed replica has as long to see a request as one that served the last request.
  const idle = idleMs === null ? null : state.preWarmedAt === null ? idleMs : Math.min(idleMs, now - state.preWarmedAt);
  if (idle === null || idle < after || inFlight + queued + waiting > 0) return null;
  return {
    ...decided, action: 'scale_down', reason: 'scale_to_zero', desiredReplicas: 0, movedBy: 'idle',
    explanation: `Scaling down from ${current} to 0 replicas: no request for ${seconds(idle)}${idle < idleMs! ? ' since the pre-warm' : ''} (scale to zero after ${seconds(after)}), and none in flight, queued or waiting.`,
  };
}

function replicas(count: number): string {
  return `${count} ${count === 1 ? 'replica' : 'replicas'}`;
}

function requests(count: number, where: string): string {
  return `${count} ${count === 1 ? 'request' : 'requests'} ${where}`;
}

function seconds(milliseconds: number): string {
  return `${Math.round(milliseconds / 100) / 10} s`;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}
