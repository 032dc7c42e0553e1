import type { ScalingPolicyName } from './scaling-policy-names';

export const SCALING_ACTIONS = ['scale_up', 'scale_down', 'hold'] as const;
export type ScalingAction = (typeof SCALING_ACTIONS)[number];

/**
 * Why a decision came out as it did: the last rule that shaped it. A closed union so the
 * GraphQL enum and the UI's wording map each code once (control-plane/autoscaling/AUTOSCALING.md).
 */
export const SCALING_REASONS = [
  'within_tolerance', // the current replicas suit the load: inside the dead band around the target
  'scale_up',         // the load needs more replicas, and nothing limited the step
  'scale_down',       // the load has needed fewer for the whole scale-down window
  'stabilizing_up',   // more wanted, but not for the whole scale-up window yet
  'stabilizing_down', // fewer wanted, but not for the whole scale-down window yet
  'step_limited',     // moving toward the need, by at most one step per decision
  'at_max',           // more wanted, held at (or brought down to) maxReplicas
  'at_min',           // fewer wanted, held at (or brought up to) minReplicas (never below 1)
  'capped_by_price',  // more wanted, held at what placement can get under the price cap
  'autoscale_off',    // autoscale is off: pinned at minReplicas
  // The `slo` policy and scale to zero (issue 39): `signal` names what moved the decision.
  'slo_forecast',     // the forecast arrival rate needs this many replicas to meet the SLO
  'slo_pressure',     // an engine signal (queue, KV-cache use) or a measured SLO breach asked for more now
  'pre_warm',         // a replica ordered ahead of a predicted rise, one start-up time early
  'cold_start',       // requests wait with no replica: one is ordered at once
  'scale_to_zero',    // no request for scaleToZeroAfterSeconds: every replica given back
  'queue_threshold',  // the KEDA-style `queue` policy's rule (benchmark only)
] as const;
export type ScalingReason = (typeof SCALING_REASONS)[number];

/**
 * One decision with every input it was made from, so a user can see why the deployment has
 * the replicas it has. Flat, so it maps to one row and one GraphQL type.
 */
export interface ScalingDecision {
  readonly deploymentId: string;
  /** The clock the caller passed (milliseconds). */
  readonly at: number;
  readonly action: ScalingAction;
  readonly reason: ScalingReason;
  /** The same, for people: which numbers led to it. */
  readonly explanation: string;
  /** Replicas the deployment should have after this decision. */
  readonly desiredReplicas: number;
  /** Ready plus starting replicas when observed. */
  readonly currentReplicas: number;
  readonly readyReplicas: number;
  /** What the load alone asks for: ceil(signal / targetConcurrency), before tolerance, windows, steps and bounds. */
  readonly wantedReplicas: number;
  /** What the load asks for after the tolerance dead band: what the stabilisation windows remember. */
  readonly recommendedReplicas: number;
  /** Mean of in-flight plus queued over the smoothing window. */
  readonly signal: number;
  /** `signal` over current replicas (over 1 when there are none). */
  readonly perReplicaLoad: number;
  readonly targetConcurrency: number;
  /** The raw observation this decision added to the window. */
  readonly inFlight: number;
  readonly queued: number;
  readonly minReplicas: number;
  readonly maxReplicas: number;
  readonly autoscale: boolean;
  readonly capacityLimit: number | null;
  /** The policy that decided (absent: `concurrency`, from before policies existed). */
  readonly policy?: ScalingPolicyName;
  /** Which input moved the decision: `forecast`, `queue`, `kv_cache`, `observed_p95`, `in_flight`, `waiting`, `idle`. */
  readonly movedBy?: string;
  /** The forecast arrival rate (req/s) one start-up time ahead, when the policy forecasts. */
  readonly forecastArrivalsPerSecond?: number | null;
  /** The arrival rate observed (req/s), when reported. */
  readonly arrivalsPerSecond?: number | null;
}
