import { AppError } from '../errors/app-error';

/**
 * How the autoscaler turns load into a replica count. The shape follows Kubernetes HPA v2
 * `behavior`, tuned for GPU replicas: a replica costs money from the moment it is ordered and
 * takes about a minute to boot and load weights, so reacting to a blip costs more than it does
 * for a pod, and giving a replica back too early means paying that minute again.
 * The defaults were checked against the bursty-day trace of `npm run bench:autoscaler`.
 */
export interface AutoscalerOptions {
  /**
   * The signal (in-flight plus queued requests) is the mean of the observations of this window.
   * It removes sampling noise (a diffusion deployment flips between 0 and 2 in flight); spikes
   * and dips are the stabilisation windows' business. Its length is added to a scale-up's
   * reaction time, on top of the replica's minute of boot: on the benchmark's bursty day, 30 s
   * instead of 10 s saved 1-14 % of GPU-hours but doubled the diffusion deployment's requests
   * over the queueing target (3.0 % → 6.3 %); 5 s cost 1-15 % more for 0.3-1.6 points fewer.
   * @default 10000
   */
  windowMs?: number;
  /**
   * Scale up only to the lowest recommendation of this window (HPA's rule), so a spike must
   * last this long to buy replicas. 0 acts on the first recommendation: with a minute of boot
   * time, waiting here adds straight to the queueing (30 s: +27 % requests over the queueing
   * target on the LLM, +89 % on diffusion), and the smoothing window already discounts a
   * single high sample.
   * @default 0
   */
  scaleUpStabilizationMs?: number;
  /**
   * Scale down only to the highest recommendation of this window (HPA's rule and default), so
   * load must stay low this long. Shorter saves GPU time but re-buys replicas (and their boot
   * minute) when a lull is followed by more load: 60 s saved 13 % of the LLM's GPU-hours but
   * made the diffusion deployment flap (704 turnarounds instead of 145, more requests over
   * target); 900 s cost 15-23 % more GPU-hours.
   * @default 300000
   */
  scaleDownStabilizationMs?: number;
  /**
   * Replicas one decision may add, whichever of this and `maxScaleUpFactor` allows more (HPA
   * `selectPolicy: Max`): +4 lets a deployment of 1 reach 5 at once.
   * @default 4
   */
  maxScaleUpStep?: number;
  /**
   * One decision may grow the replica count to this multiple, whichever of this and
   * `maxScaleUpStep` allows more: doubling lets a large deployment follow a surge in a few
   * decisions without a bad reading ordering dozens of GPUs at once.
   * @default 2
   */
  maxScaleUpFactor?: number;
  /**
   * Replicas one decision may remove; scale-down is never urgent, and removing one at a time
   * leaves room to stop when load comes back (4 at a time saved under 1 % of GPU-hours).
   * @default 1
   */
  maxScaleDownStep?: number;
  /**
   * Dead band: scale up only above target × (1 + tolerance) per replica, and scale down only
   * as far as keeps the load at or under target × (1 − tolerance) per replica, so a load
   * hovering around a boundary does not flap (`recommendWithinDeadBand`). HPA's 10 %: 0 made
   * 60 % more turnarounds; 0.25 cost 2-9 % more GPU-hours.
   * @default 0.1
   */
  tolerance?: number;
}

export type CompiledAutoscalerOptions = Readonly<Required<AutoscalerOptions>>;

export const DEFAULT_AUTOSCALER_OPTIONS: CompiledAutoscalerOptions = Object.freeze({
  windowMs: 10_000,
  scaleUpStabilizationMs: 0,
  scaleDownStabilizationMs: 300_000,
  maxScaleUpStep: 4,
  maxScaleUpFactor: 2,
  maxScaleDownStep: 1,
  tolerance: 0.1,
});

/** Fills the defaults and validates; throws `invalid_request` naming the option at fault. */
export function compileAutoscalerOptions(options: AutoscalerOptions = {}): CompiledAutoscalerOptions {
  const compiled = { ...DEFAULT_AUTOSCALER_OPTIONS, ...withoutUndefined(options) };
  const rules: Array<[keyof AutoscalerOptions, boolean, string]> = [
    ['windowMs', Number.isFinite(compiled.windowMs) && compiled.windowMs > 0, 'a duration above 0'],
    ['scaleUpStabilizationMs', Number.isFinite(compiled.scaleUpStabilizationMs) && compiled.scaleUpStabilizationMs >= 0, 'a duration of 0 or more'],
    ['scaleDownStabilizationMs', Number.isFinite(compiled.scaleDownStabilizationMs) && compiled.scaleDownStabilizationMs >= 0, 'a duration of 0 or more'],
    ['maxScaleUpStep', Number.isInteger(compiled.maxScaleUpStep) && compiled.maxScaleUpStep >= 1, 'an integer of 1 or more'],
    ['maxScaleUpFactor', Number.isFinite(compiled.maxScaleUpFactor) && compiled.maxScaleUpFactor >= 1, 'a number of 1 or more'],
    ['maxScaleDownStep', Number.isInteger(compiled.maxScaleDownStep) && compiled.maxScaleDownStep >= 1, 'an integer of 1 or more'],
    ['tolerance', Number.isFinite(compiled.tolerance) && compiled.tolerance >= 0 && compiled.tolerance < 1, 'a fraction from 0 to below 1'],
  ];
  for (const [name, valid, expected] of rules) {
    if (!valid) throw new AppError('invalid_request', `autoscaler option ${name} must be ${expected}, got ${compiled[name]}`, { param: name });
  }
  return Object.freeze(compiled);
}

function withoutUndefined(options: AutoscalerOptions): AutoscalerOptions {
  return Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined));
}
