import { AppError } from '../errors/app-error';

/**
 * What the autoscaler remembers of one deployment between decisions: the observations of the
 * smoothing window and the recommendations of the stabilisation windows. Plain data, owned
 * by the caller (one per deployment), so `Autoscaler.decide` stays a function of its inputs
 * and this object, and a test or a restart can build one from nothing.
 */
export interface ScalingState {
  /** In-flight plus queued per observation, oldest first, within the smoothing window. */
  samples: Array<{ at: number; load: number }>;
  /** Recommended replicas per decision, oldest first, within the longer stabilisation window. */
  recommendations: Array<{ at: number; replicas: number; seed?: true }>;
  /** Clock of the last decision; the clock must not run backwards. */
  lastAt: number | null;
}

export function newScalingState(): ScalingState {
  return { samples: [], recommendations: [], lastAt: null };
}

export function advanceClock(state: ScalingState, now: number): void {
  if (!Number.isFinite(now) || (state.lastAt !== null && now < state.lastAt)) {
    throw new AppError('internal_error', `autoscaler clock went from ${state.lastAt} back to ${now}`);
  }
  state.lastAt = now;
}

/** Adds the observation and returns the mean load of the window ending at `now`. */
export function smoothedSignal(state: ScalingState, now: number, load: number, windowMs: number): number {
  state.samples.push({ at: now, load });
  while (state.samples[0].at <= now - windowMs) state.samples.shift();
  return state.samples.reduce((sum, sample) => sum + sample.load, 0) / state.samples.length;
}

/**
 * Adds this decision's recommendation and returns HPA's stabilised bounds: the lowest
 * recommendation of the scale-up window (scale up no further than load has asked for all
 * along) and the highest of the scale-down window (scale down no further than it has allowed
 * all along). The first decision of a state is taken as following one that recommended the
 * current replicas, so a control plane that restarts with empty memory does not scale down
 * before a whole scale-down window has been seen (HPA seeds its history the same way).
 */
export function stabilizedBounds(
  state: ScalingState, now: number, recommended: number, currentReplicas: number,
  scaleUpStabilizationMs: number, scaleDownStabilizationMs: number,
): { scaleUpTo: number; scaleDownTo: number } {
  if (state.recommendations.length === 0) state.recommendations.push({ at: now, replicas: currentReplicas, seed: true });
  state.recommendations.push({ at: now, replicas: recommended });
  const keepAfter = now - Math.max(scaleUpStabilizationMs, scaleDownStabilizationMs);
  while (state.recommendations.length > 1 && state.recommendations[0].at <= keepAfter) state.recommendations.shift();
  let scaleUpTo = recommended;
  let scaleDownTo = recommended;
  for (const entry of state.recommendations) {
    // The seed stands for the past only when deciding to give replicas back.
    if (!entry.seed && entry.at > now - scaleUpStabilizationMs) scaleUpTo = Math.min(scaleUpTo, entry.replicas);
    if (entry.at > now - scaleDownStabilizationMs) scaleDownTo = Math.max(scaleDownTo, entry.replicas);
  }
  return { scaleUpTo, scaleDownTo };
}
