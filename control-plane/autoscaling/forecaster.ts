import { AppError } from '../errors/app-error';

export interface HoltWintersOptions {
  /** Weight of the newest sample in the level (0–1]: higher follows faster, and follows noise. */
  alpha: number;
  /** Weight of the newest level change in the trend [0–1]. */
  beta: number;
  /** Weight of the newest sample in its season slot [0–1]; only with `seasonLength`. @default 0.1 */
  gamma?: number;
  /** Samples per season (e.g. a day of 30 s samples is 2,880); absent: level and trend only. */
  seasonLength?: number | null;
}

/** What the forecaster remembers; plain data, so it lives inside a policy's per-deployment state. */
export interface HoltWintersState {
  level: number;
  trend: number;
  /** Seasonal offsets, one per slot of the season; null until two seasons have been seen (or without a season). */
  season: number[] | null;
  /** Samples seen. */
  seen: number;
  /** The first two seasons' samples, kept only until the season is initialised. */
  warmup: number[];
}

/**
 * Additive Holt-Winters: a short-horizon forecast of a series (the arrival rate) from its level,
 * its trend and, optionally, a season. Level and trend start from the first two samples (so a
 * linear series is forecast exactly from the second sample on); a season starts from the first
 * two whole seasons (level from their means, trend from the step between them, each slot's
 * offset from the de-trended samples), and until then the forecast is level and trend alone.
 * Pure: `update` and `forecast` take the state the caller keeps.
 */
export class HoltWinters {
  readonly alpha: number;
  readonly beta: number;
  readonly gamma: number;
  readonly seasonLength: number | null;

  constructor(options: HoltWintersOptions) {
    this.alpha = options.alpha;
    this.beta = options.beta;
    this.gamma = options.gamma ?? 0.1;
    this.seasonLength = options.seasonLength ?? null;
    const rules: Array<[string, boolean, string]> = [
      ['alpha', this.alpha > 0 && this.alpha <= 1, 'a fraction above 0, at most 1'],
      ['beta', this.beta >= 0 && this.beta <= 1, 'a fraction from 0 to 1'],
      ['gamma', this.gamma >= 0 && this.gamma <= 1, 'a fraction from 0 to 1'],
      ['seasonLength', this.seasonLength === null || (Number.isInteger(this.seasonLength) && this.seasonLength >= 2), 'an integer of 2 or more'],
    ];
    for (const [name, valid, expected] of rules) {
      if (!valid) throw new AppError('invalid_request', `forecaster option ${name} must be ${expected}`, { param: name });
    }
  }

  newState(): HoltWintersState {
    return { level: 0, trend: 0, season: null, seen: 0, warmup: [] };
  }

  update(state: HoltWintersState, value: number): void {
    const { alpha, beta, gamma, seasonLength } = this;
    const index = state.seen++;
    if (seasonLength !== null && state.season === null) state.warmup.push(value);
    if (index === 0) {
      state.level = value;
      return;
    }
    if (index === 1) {
      state.trend = value - state.level;
      state.level = value;
      return;
    }
    if (seasonLength !== null && state.season === null && state.warmup.length === 2 * seasonLength) {
      initialiseSeason(state, seasonLength);
      return;
    }
    if (state.season === null || seasonLength === null) {
      const level = alpha * value + (1 - alpha) * (state.level + state.trend);
      state.trend = beta * (level - state.level) + (1 - beta) * state.trend;
      state.level = level;
      return;
    }
    const slot = index % seasonLength;
    const offset = state.season[slot];
    const level = alpha * (value - offset) + (1 - alpha) * (state.level + state.trend);
    state.trend = beta * (level - state.level) + (1 - beta) * state.trend;
    state.season[slot] = gamma * (value - level) + (1 - gamma) * offset;
    state.level = level;
  }

  /** The value expected `steps` samples after the last one (1 = the next sample); NaN before any sample. */
  forecast(state: HoltWintersState, steps: number): number {
    if (state.seen === 0) return Number.NaN;
    const trended = state.level + steps * state.trend;
    if (state.season === null || this.seasonLength === null) return trended;
    return trended + state.season[(state.seen - 1 + steps) % this.seasonLength];
  }
}

function initialiseSeason(state: HoltWintersState, length: number): void {
  const values = state.warmup;
  const mean = (from: number) => values.slice(from, from + length).reduce((sum, value) => sum + value, 0) / length;
  const first = mean(0);
  const trend = (mean(length) - first) / length;
  // Sample i of the first season sits (i − (length − 1) / 2) samples from that season's middle.
  const season = Array.from({ length }, (_, slot) =>
    ((values[slot] - (first + trend * (slot - (length - 1) / 2)))
      + (values[slot + length] - (first + trend * (slot + length - (length - 1) / 2)))) / 2);
  state.trend = trend;
  state.level = first + trend * (2 * length - 1 - (length - 1) / 2);
  state.season = season;
  state.warmup = [];
}
