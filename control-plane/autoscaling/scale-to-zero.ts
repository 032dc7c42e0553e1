import type { ScalingDecision } from './scaling-decision';
import type { ScalingObservation } from './scaling-observation';
import type { ScalingPolicy } from './scaling-policy';

/**
 * Scale to zero for any policy (issue 39). SPEC.md keeps `minReplicas` at 1 or more, so zero is
 * a separate opt-in: `scaleToZeroAfterMs` (the deployment's `scaleToZeroAfterSeconds`). With it
 * set, on top of what `policy` decides:
 * - replicas > 0, no request for `scaleToZeroAfterMs`, nothing in flight, queued or waiting:
 *   every replica is given back (`scale_to_zero`, moved by `idle`);
 * - 0 replicas and requests waiting for one (at a gateway's cold-start queue, or media queued):
 *   max(1, what the policy wants) at once, past any window or step (`cold_start`, moved by
 *   `waiting` or `queue`);
 * - 0 replicas and nothing waiting: 0 stays (`scale_to_zero`, a hold).
 * Anything else, and every deployment without the setting, is the policy's (whose floor is
 * max(1, min)). The policy decides on every observation all the same, so its windows stay
 * continuous across a stay at zero. Autoscale off does not stop it: the setting is its own
 * opt-in, and "off" pins the count while there is traffic.
 */
export function withScaleToZero<State>(policy: ScalingPolicy<State>): ScalingPolicy<State> {
  return {
    name: policy.name,
    newState: () => policy.newState(),
    decide(state, observation, now) {
      const decided = policy.decide(state, observation, now);
      return scaleToZero(decided, observation) ?? decided;
    },
  };
}

/** The decision scale to zero makes instead of `decided`, or null when it leaves it to the policy. */
function scaleToZero(decided: ScalingDecision, observation: ScalingObservation): ScalingDecision | null {
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
    // The forecaster may order a replica ahead of a predicted rise, from zero too.
    if (decided.reason === 'pre_warm' && decided.desiredReplicas > 0) return null;
    return {
      ...decided, action: 'hold', reason: 'scale_to_zero', desiredReplicas: 0, movedBy: 'idle',
      explanation: `Holding 0 replicas: scaled to zero, and no request waits; the next one starts a replica${idleMs === null ? '' : ` (last request ${seconds(idleMs)} ago)`}.`,
    };
  }
  if (idleMs === null || idleMs < after || inFlight + queued + waiting > 0) return null;
  return {
    ...decided, action: 'scale_down', reason: 'scale_to_zero', desiredReplicas: 0, movedBy: 'idle',
    explanation: `Scaling down from ${current} to 0 replicas: no request for ${seconds(idleMs)} (scale to zero after ${seconds(after)}), and none in flight, queued or waiting.`,
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
