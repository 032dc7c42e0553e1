import type { ScalingDecision, ScalingReason } from './scaling-decision';

/** An unchanged hold is recorded again after this long, so the history shows the autoscaler alive. */
export const UNCHANGED_HOLD_RECORD_INTERVAL_MS = 60_000;

/**
 * Hold reasons that say "the count suits the load, or will once the windows agree". A noisy
 * load flips between them with every sample (a Poisson load around a replica boundary is
 * `within_tolerance` one decision and `stabilizing_down` the next). On the simulated diurnal
 * day of the tests, recording each flip made 4,142 rows, 3,605 of them flips; without them,
 * 1,480. So changes among these wait for the interval.
 */
const SETTLING_REASONS: ReadonlySet<ScalingReason> = new Set(['within_tolerance', 'stabilizing_up', 'stabilizing_down']);

/**
 * Whether `next` is worth a row, given the last decision that was recorded for the deployment
 * (not the last one made). The platform decides every few seconds per deployment; a steady
 * deployment would write 17,280 near-identical rows a day and bury the few that explain something.
 * Recorded at once: the first decision; every scale action; every change of desired or current
 * replicas, of the user's settings (the policy included) or the price-cap limit (so each edit shows its effect), and
 * of reason, except between the settling reasons above. Anything else at most once per
 * `intervalMs`. The load alone changing does not count: it moves with every sample, and is in
 * the next recorded row anyway.
 */
export function shouldRecord(
  previous: ScalingDecision | null, next: ScalingDecision, intervalMs = UNCHANGED_HOLD_RECORD_INTERVAL_MS,
): boolean {
  if (previous === null || next.action !== 'hold') return true;
  const reasonChanged = previous.reason !== next.reason && !(SETTLING_REASONS.has(previous.reason) && SETTLING_REASONS.has(next.reason));
  const changed = reasonChanged
    || previous.desiredReplicas !== next.desiredReplicas
    || previous.currentReplicas !== next.currentReplicas
    || previous.minReplicas !== next.minReplicas
    || previous.maxReplicas !== next.maxReplicas
    || previous.autoscale !== next.autoscale
    || previous.policy !== next.policy
    || previous.capacityLimit !== next.capacityLimit;
  return changed || next.at - previous.at >= intervalMs;
}
