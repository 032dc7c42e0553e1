import { AppError } from '../errors/app-error';

/** What the platform sees of one deployment when it asks the autoscaler for a decision. */
export interface ScalingObservation {
  readonly deploymentId: string;
  /** Requests running on the deployment's replicas now. */
  readonly inFlight: number;
  /** Requests admitted but waiting for a free slot. */
  readonly queued: number;
  /** Replicas ready or starting: ordered replicas count, so a boot in progress is not re-ordered. */
  readonly currentReplicas: number;
  /** Replicas ready to serve (recorded to explain a decision; not part of the arithmetic). */
  readonly readyReplicas: number;
  /** The catalog's in-flight requests one replica is sized for (32 for LLMs, 1 for diffusion). */
  readonly targetConcurrency: number;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  /** Off: pinned at `minReplicas`. */
  readonly autoscale: boolean;
  /**
   * The most replicas the deployment can hold under its price cap right now, counting the
   * replicas it already has; null or absent when unknown or unlimited.
   */
  readonly capacityLimit?: number | null;
}

/**
 * Observations are built by the platform from validated rows (the deployment service rejects
 * min above max), so a bad one is a bug upstream, reported rather than scaled on.
 */
export function validateObservation(observation: ScalingObservation): void {
  const { inFlight, queued, currentReplicas, readyReplicas, targetConcurrency, minReplicas, maxReplicas, capacityLimit } = observation;
  const problems = [
    !isCount(inFlight) && `inFlight ${inFlight}`,
    !isCount(queued) && `queued ${queued}`,
    !isCount(currentReplicas) && `currentReplicas ${currentReplicas}`,
    !(isCount(readyReplicas) && readyReplicas <= currentReplicas) && `readyReplicas ${readyReplicas} of ${currentReplicas}`,
    !(Number.isFinite(targetConcurrency) && targetConcurrency > 0) && `targetConcurrency ${targetConcurrency}`,
    !(isCount(minReplicas) && isCount(maxReplicas) && Math.max(1, minReplicas) <= maxReplicas) && `replicas range [${minReplicas}, ${maxReplicas}]`,
    !(capacityLimit === undefined || capacityLimit === null || isCount(capacityLimit)) && `capacityLimit ${capacityLimit}`,
  ].filter((problem): problem is string => typeof problem === 'string');
  if (problems.length > 0) {
    throw new AppError('internal_error', `invalid scaling observation for deployment ${observation.deploymentId}: ${problems.join(', ')}`);
  }
}

function isCount(value: number): boolean {
  return Number.isInteger(value) && value >= 0;
}
