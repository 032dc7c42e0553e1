import type { Deployment } from './deployment.entity';

/**
 * A deployment with `scaleToZeroAfterSeconds` set may have 0 replicas (the API contract keeps
 * `minReplicas` at 1 or more, docs/scaling-settings.md: zero is this separate opt-in). It stays `Running` meanwhile, its
 * endpoint takes requests (they wait at the gateway while a replica starts), and with no
 * replica nothing is billed. These are the status reasons it shows on the way.
 */
export const SCALED_TO_ZERO_REASON = 'scaled to zero: the next request starts a replica';
export const COLD_START_REASON = 'cold start: a replica is starting for the requests waiting';

/** The replicas placement brings the deployment to: 0 only when the autoscaler chose it and the deployment scales to zero. */
export function wantedReplicas(deployment: Pick<Deployment, 'minReplicas' | 'maxReplicas' | 'desiredReplicas' | 'scaleToZeroAfterSeconds'>): number {
  if (deployment.desiredReplicas === 0 && scalesToZero(deployment)) return 0;
  return Math.max(deployment.minReplicas, Math.min(deployment.maxReplicas, deployment.desiredReplicas));
}

export function scalesToZero(deployment: Pick<Deployment, 'scaleToZeroAfterSeconds'>): boolean {
  return deployment.scaleToZeroAfterSeconds !== null && deployment.scaleToZeroAfterSeconds !== undefined;
}
