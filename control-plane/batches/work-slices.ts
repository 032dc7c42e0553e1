import { performance } from 'node:perf_hooks';

/**
 * Work the event loop must not wait for runs in slices: `due()` after each unit of work
 * (a line of a file), and once the slice has used its budget, `next()` gives the loop one turn
 * (setImmediate: timers, sockets and other requests run) before the next slice. A slice ends
 * after the unit that crossed the budget, so it is the budget plus one unit at most.
 *
 * Slicing by time, not by a count of units: the validator used to yield every 500 lines, and
 * 500 lines of 200 KB each are 100 MB of JSON in one turn (`/healthz` waited 9.2 s).
 */
export class WorkSlices {
  /** Turns given to the event loop so far. */
  yields = 0;
  /** The longest slice so far, in ms (reported, never relied on: a busy machine stretches it). */
  longestSliceMs = 0;
  private sliceStartedAt: number;

  constructor(
    /** Work per slice before the loop gets a turn. @default 4 */
    private readonly budgetMs = DEFAULT_SLICE_BUDGET_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.sliceStartedAt = now();
  }

  /** Whether the slice has used its budget (the caller then awaits `next()`). */
  due(): boolean {
    return this.now() - this.sliceStartedAt >= this.budgetMs;
  }

  /** Ends the slice, lets the event loop run once, and starts the next one. */
  async next(): Promise<void> {
    this.longestSliceMs = Math.max(this.longestSliceMs, this.now() - this.sliceStartedAt);
    this.yields++;
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.sliceStartedAt = this.now();
  }

  /** `next()` when due: the call between two units of work. */
  async pause(): Promise<void> {
    if (this.due()) await this.next();
  }
}

/**
 * 4 ms: a request arriving mid-validation waits at most about this and one line (a line of at
 * most MAX_JSON_CONTAINERS arrays and objects parses in ~10 ms). At 10 ms, other tenants'
 * GraphQL calls took 5x their unloaded p99 beside a validating batch of such lines.
 */
export const DEFAULT_SLICE_BUDGET_MS = 4;
