import { seededRandom } from '../../common/seeded-random';
import { poisson } from './poisson';

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

/**
 * Requests one by one, as a recorded trace has them: when each arrived and how many prompt and
 * output tokens it had. Sorted by arrival; typed arrays so a busy day stays a few megabytes.
 */
export interface RequestTrace {
  readonly name: string;
  /** Length of the trace; requests arrive in [0, seconds). */
  readonly seconds: number;
  readonly arrivalMs: Float64Array;
  readonly promptTokens: Uint32Array;
  readonly outputTokens: Uint32Array;
}

/** A lognormal length: `median` tokens, spread `sigma` (of the log), at least 1 and at most `max`. */
export interface TokenLengths {
  readonly median: number;
  readonly sigma: number;
  readonly max: number;
}

export interface RequestLengths {
  readonly prompt: TokenLengths;
  readonly output: TokenLengths;
}

/**
 * Chat-like text lengths: a median prompt of 800 tokens and a median answer of 180, both
 * lognormal with a long tail (a tenth of prompts are over 2,200 tokens), capped at an 8k context.
 */
export const CHAT_LENGTHS: RequestLengths = {
  prompt: { median: 800, sigma: 0.8, max: 8_000 },
  output: { median: 180, sigma: 0.7, max: 2_000 },
};

/**
 * Poisson arrivals at the trace's rate second by second (placed uniformly within each second),
 * each with lognormal prompt and output lengths; the same seed gives the same requests.
 */
export function requestTrace(name: string, rates: ArrivalTrace, lengths: RequestLengths, seed: number): RequestTrace {
  const random = seededRandom(seed);
  const arrivals: number[] = [];
  for (let second = 0; second < rates.length; second++) {
    const count = poisson(random, rates[second]);
    const within = Array.from({ length: count }, () => random()).sort((left, right) => left - right);
    for (const offset of within) arrivals.push((second + offset) * 1000);
  }
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const draw = (length: TokenLengths) => Math.max(1, Math.min(length.max, Math.round(length.median * Math.exp(length.sigma * normal()))));
  const promptTokens = new Uint32Array(arrivals.length);
  const outputTokens = new Uint32Array(arrivals.length);
  for (let index = 0; index < arrivals.length; index++) {
    promptTokens[index] = draw(lengths.prompt);
    outputTokens[index] = draw(lengths.output);
  }
  return { name, seconds: rates.length, arrivalMs: Float64Array.from(arrivals), promptTokens, outputTokens };
}

export interface SpikeTrainOptions {
  seconds: number;
  /** Arrivals per second between spikes. */
  base: number;
  /** A spike starts every `periodSeconds`, give or take `jitterSeconds` (uniform). */
  periodSeconds: number;
  jitterSeconds: number;
  /** Each spike multiplies the base by a factor drawn uniformly from this range … */
  multiplier: readonly [number, number];
  /** … for a number of seconds drawn uniformly from this range. */
  spikeSeconds: readonly [number, number];
  seed: number;
}

/**
 * A spike train: a steady base with short, sharp spikes on a rough schedule (jobs a cron starts
 * every so often, a notification sent to every user). A spike arrives at once, faster than a
 * GPU replica boots, so a policy that only reacts pays for it in missed SLOs.
 */
export function spikeTrainTrace(options: SpikeTrainOptions): { trace: ArrivalTrace; spikes: Burst[] } {
  const random = seededRandom(options.seed);
  const between = (range: readonly [number, number]) => range[0] + (range[1] - range[0]) * random();
  const rates = new Array<number>(options.seconds).fill(options.base);
  const spikes: Burst[] = [];
  for (let start = options.periodSeconds; start < options.seconds; start += options.periodSeconds) {
    const atSecond = Math.max(0, Math.round(start + (2 * random() - 1) * options.jitterSeconds));
    const spike = { atSecond, seconds: Math.round(between(options.spikeSeconds)), multiplier: between(options.multiplier) };
    spikes.push(spike);
    for (let second = atSecond; second < Math.min(options.seconds, atSecond + spike.seconds); second++) rates[second] = options.base * spike.multiplier;
  }
  return { trace: rates, spikes };
}

export interface SparseTraceOptions {
  seconds: number;
  /** Idle gaps between sessions are exponential with this mean. */
  meanIdleSeconds: number;
  /** A session lasts a number of seconds drawn uniformly from this range … */
  sessionSeconds: readonly [number, number];
  /** … at a rate drawn uniformly from this range. */
  sessionRate: readonly [number, number];
  seed: number;
}

/**
 * A sparse deployment: sessions of use (someone trying a model, an evaluation run, a demo)
 * separated by long idle gaps with no request at all: what scale to zero is for.
 */
export interface Session {
  readonly atSecond: number;
  readonly seconds: number;
  /** Arrivals per second during the session. */
  readonly rate: number;
}

export function sparseTrace(options: SparseTraceOptions): { trace: ArrivalTrace; sessions: Session[] } {
  const random = seededRandom(options.seed);
  const between = (range: readonly [number, number]) => range[0] + (range[1] - range[0]) * random();
  const rates = new Array<number>(options.seconds).fill(0);
  const sessions: Session[] = [];
  for (let at = -Math.log(1 - random()) * options.meanIdleSeconds; at < options.seconds;) {
    const session = { atSecond: Math.floor(at), seconds: Math.round(between(options.sessionSeconds)), rate: between(options.sessionRate) };
    sessions.push(session);
    for (let second = session.atSecond; second < Math.min(options.seconds, session.atSecond + session.seconds); second++) rates[second] = session.rate;
    at = session.atSecond + session.seconds - Math.log(1 - random()) * options.meanIdleSeconds;
  }
  return { trace: rates, sessions };
}
