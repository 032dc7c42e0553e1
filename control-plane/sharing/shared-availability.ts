/** The availability states of a shared model (docs/api-contract.md#shared-endpoint). */
export type SharedAvailability = 'Available' | 'Degraded' | 'Unavailable';

/** What the pool measures of one shared model, as the availability rule reads it. */
export interface PoolMeasures {
  /** Shared deployments with at least one replica taking guests. */
  providers: number;
  /** Guest slots free now, over every provider's replicas. */
  idleGuestSlots: number;
  /** Guest requests admitted and refused (429) in the last window. */
  admitted: number;
  refused: number;
  /** Median time to first token of guest requests in the last window (ms), null under 5 samples. */
  recentTtftMs: number | null;
  /** The pool's own baseline: the lowest one-minute median of the last 30 minutes (ms), null before one. */
  baselineTtftMs: number | null;
}

/** A refused share of guest requests above this is Degraded: guests are queueing for slots. */
export const REFUSED_SHARE_DEGRADED = 0.2;
/** Guest TTFT this many times the pool's baseline is Degraded: slower but succeeding. */
export const TTFT_RATIO_DEGRADED = 2;

/**
 * Unavailable: no provider is left. Degraded: no idle guest slot now, more than 20 % of the
 * last minute's guest requests refused, or their median TTFT above twice the pool's baseline.
 * Available otherwise.
 */
export function availabilityOf(measures: PoolMeasures): SharedAvailability {
  if (measures.providers === 0) return 'Unavailable';
  if (measures.idleGuestSlots === 0) return 'Degraded';
  const asked = measures.admitted + measures.refused;
  if (asked >= 5 && measures.refused / asked > REFUSED_SHARE_DEGRADED) return 'Degraded';
  if (measures.recentTtftMs !== null && measures.baselineTtftMs !== null && measures.recentTtftMs > TTFT_RATIO_DEGRADED * measures.baselineTtftMs) {
    return 'Degraded';
  }
  return 'Available';
}

const WINDOW_MS = 60_000;
const BASELINE_MINUTES = 30;
const MAX_SAMPLES = 4_096;

/**
 * The last minute of one model's guest traffic (admissions, refusals, TTFT samples) and the
 * per-minute TTFT medians its baseline is the lowest of. Admissions and refusals are counts per
 * second over the last 60 (a refusal is one increment: a flood of thousands a second costs
 * nothing here, and is counted whole); TTFT samples are bounded to MAX_SAMPLES.
 */
export class GuestTraffic {
  private readonly admittedPerSecond = new SecondCounts();
  private readonly refusedPerSecond = new SecondCounts();
  private ttft: Array<{ at: number; ms: number }> = [];
  private minute = -1;
  private minuteSamples: number[] = [];
  private readonly minuteMedians: Array<{ minute: number; median: number }> = [];

  constructor(private readonly now: () => number = Date.now) {}

  admitted(): void {
    this.admittedPerSecond.add(this.now());
  }

  refused(): void {
    this.refusedPerSecond.add(this.now());
  }

  firstToken(ms: number): void {
    const at = this.now();
    push(this.ttft, { at, ms });
    const minute = Math.floor(at / WINDOW_MS);
    if (minute !== this.minute) this.closeMinute(minute);
    if (this.minuteSamples.length < MAX_SAMPLES) this.minuteSamples.push(ms);
  }

  measures(): Pick<PoolMeasures, 'admitted' | 'refused' | 'recentTtftMs' | 'baselineTtftMs'> {
    const now = this.now();
    const since = now - WINDOW_MS;
    this.ttft = this.ttft.filter((sample) => sample.at >= since);
    const oldest = Math.floor(now / WINDOW_MS) - BASELINE_MINUTES;
    while (this.minuteMedians.length > 0 && this.minuteMedians[0].minute < oldest) this.minuteMedians.shift();
    return {
      admitted: this.admittedPerSecond.total(now),
      refused: this.refusedPerSecond.total(now),
      recentTtftMs: this.ttft.length >= 5 ? median(this.ttft.map((sample) => sample.ms)) : null,
      baselineTtftMs: this.minuteMedians.length > 0 ? Math.min(...this.minuteMedians.map((entry) => entry.median)) : null,
    };
  }

  private closeMinute(minute: number): void {
    if (this.minuteSamples.length >= 5) this.minuteMedians.push({ minute: this.minute, median: median(this.minuteSamples) });
    this.minute = minute;
    this.minuteSamples = [];
  }
}

const SECONDS = WINDOW_MS / 1000;

/** Events per second over the last 60 seconds: a ring of counters, each reset when its second comes round again. */
class SecondCounts {
  private readonly counts = new Array<number>(SECONDS).fill(0);
  private readonly seconds = new Array<number>(SECONDS).fill(-1);

  add(at: number): void {
    const second = Math.floor(at / 1000);
    const slot = second % SECONDS;
    if (this.seconds[slot] !== second) {
      this.seconds[slot] = second;
      this.counts[slot] = 0;
    }
    this.counts[slot]++;
  }

  /** Events in the 60 seconds up to `now` (the current second included). */
  total(now: number): number {
    const oldest = Math.floor(now / 1000) - SECONDS + 1;
    let sum = 0;
    for (let slot = 0; slot < SECONDS; slot++) if (this.seconds[slot] >= oldest) sum += this.counts[slot];
    return sum;
  }
}

function push<T>(list: T[], value: T): void {
  if (list.length >= MAX_SAMPLES) list.shift();
  list.push(value);
}

function median(values: number[]): number {
  const sorted = [...values].sort((left, right) => left - right);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}
