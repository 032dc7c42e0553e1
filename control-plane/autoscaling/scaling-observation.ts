import { AppError } from '../errors/app-error';
import type { SloTargets } from './scaling-policy-names';
import type { ServiceModel } from './service-model';

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
  // The signals below feed the `slo` policy and scale to zero (issue 39); the `concurrency`
  // policy ignores them. Absent means "not reported", never zero.
  /** Requests that arrived per second since the previous observation (owner requests, every server). */
  readonly arrivalsPerSecond?: number;
  /** The deployment's SLO; null or absent: none stated. */
  readonly slo?: SloTargets | null;
  /** The highest KV-cache use (0–1) any ready replica's engine reports; null when none reports it. */
  readonly kvCacheUsage?: number | null;
  /** Measured TTFT p95 (text) or queue-wait p95 (media) of the last minute, ms; null without requests. */
  readonly observedP95Ms?: number | null;
  /** Requests waiting at the gateways for a first replica (scale to zero's bounded queue). */
  readonly waitingForReplica?: number;
  /** Milliseconds since the deployment's last request arrived (null: none since the server started). */
  readonly idleMs?: number | null;
  /** Scale to zero after this long without requests (ms); null or absent: never below max(1, min). */
  readonly scaleToZeroAfterMs?: number | null;
  /** What one replica can do, for a policy that sizes from a service model (service-model.ts). */
  readonly serviceModel?: ServiceModel;
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
