import { seededRandom } from '../../common/seeded-random';

/** Mean arrivals per second for each simulated second (index 0 is the first second). */
export type ArrivalTrace = readonly number[];

/** `before` until `atSecond`, then `after`: a deployment going from idle to busy at once. */
export function stepTrace(options: { seconds: number; atSecond: number; before: number; after: number }): ArrivalTrace {
  return Array.from({ length: options.seconds }, (_, second) => (second < options.atSecond ? options.before : options.after));
}

/** `from` for `holdSeconds`, linearly to `to` over `rampSeconds`, and back down over as long. */
export function rampTrace(options: { from: number; to: number; holdSeconds: number; rampSeconds: number }): ArrivalTrace {
  const { from, to, holdSeconds, rampSeconds } = options;
  const up = (second: number) => from + ((to - from) * second) / rampSeconds;
  return [
    ...Array.from({ length: holdSeconds }, () => from),
    ...Array.from({ length: rampSeconds }, (_, second) => up(second)),
    ...Array.from({ length: rampSeconds }, (_, second) => up(rampSeconds - second)),
    ...Array.from({ length: holdSeconds }, () => from),
  ];
}

/** `base`, with `burst` from `atSecond` for `burstSeconds`. */
export function burstTrace(options: { seconds: number; base: number; burst: number; atSecond: number; burstSeconds: number }): ArrivalTrace {
  const { base, burst, atSecond, burstSeconds } = options;
  return Array.from({ length: options.seconds }, (_, second) => (second >= atSecond && second < atSecond + burstSeconds ? burst : base));
}

export interface DiurnalTraceOptions {
  seconds: number;
  /** Arrivals per second at the quietest moment. */
  trough: number;
  /** Arrivals per second at the busiest moment. */
  peak: number;
  /** @default 86400 (a day) */
  periodSeconds?: number;
  /** When the peak falls. @default 14 h into the period */
  peakAtSecond?: number;
}

/** A day's cycle: a cosine from `trough` to `peak` and back. */
export function diurnalTrace(options: DiurnalTraceOptions): ArrivalTrace {
  const { trough, peak, periodSeconds = 86_400 } = options;
  const peakAtSecond = options.peakAtSecond ?? (periodSeconds * 14) / 24;
  return Array.from({ length: options.seconds }, (_, second) =>
    trough + ((peak - trough) * (1 + Math.cos((2 * Math.PI * (second - peakAtSecond)) / periodSeconds))) / 2);
}

export interface BurstyDiurnalTraceOptions extends DiurnalTraceOptions {
  /** Mean time between burst starts (exponential gaps, so some come close together). */
  meanSecondsBetweenBursts: number;
  /** Each burst multiplies the diurnal rate by a factor drawn uniformly from this range. */
  burstMultiplier: readonly [number, number];
  /** Each burst lasts a number of seconds drawn uniformly from this range. */
  burstSeconds: readonly [number, number];
  seed: number;
}

export interface Burst {
  readonly atSecond: number;
  readonly seconds: number;
  readonly multiplier: number;
}

/**
 * The diurnal cycle with bursts on top: a launch, a batch job, a post going viral. Where
 * bursts overlap the larger multiplier applies (they do not compound), so the worst moment is
 * the peak times the top of `burstMultiplier`, which is what maxReplicas can be sized for.
 */
export function burstyDiurnalTrace(options: BurstyDiurnalTraceOptions): { trace: ArrivalTrace; bursts: Burst[] } {
  const random = seededRandom(options.seed);
  const between = (range: readonly [number, number]) => range[0] + (range[1] - range[0]) * random();
  const diurnal = diurnalTrace(options);
  const multipliers = new Array<number>(options.seconds).fill(1);
  const bursts: Burst[] = [];
  for (let at = -Math.log(1 - random()) * options.meanSecondsBetweenBursts; at < options.seconds;
    at += -Math.log(1 - random()) * options.meanSecondsBetweenBursts) {
    const burst = { atSecond: Math.floor(at), seconds: Math.round(between(options.burstSeconds)), multiplier: between(options.burstMultiplier) };
    bursts.push(burst);
    for (let second = burst.atSecond; second < Math.min(options.seconds, burst.atSecond + burst.seconds); second++) {
      multipliers[second] = Math.max(multipliers[second], burst.multiplier);
    }
  }
  return { trace: diurnal.map((rate, second) => rate * multipliers[second]), bursts };
}
