/**
 * Capped exponential backoff with full jitter: the delay before attempt k is uniform in
 * [0, min(max, initial * 2^k)]. Full jitter keeps a fleet of agents that lost the control plane
 * at the same moment from reconnecting in lockstep.
 */
export class Backoff {
  private attempt = 0;

  constructor(
    private readonly initialMs: number,
    private readonly maxMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  nextDelayMs(): number {
    const ceiling = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt += 1;
    return Math.floor(this.random() * ceiling);
  }

  /** After a successful Welcome the next failure starts from the initial delay again. */
  reset(): void {
    this.attempt = 0;
  }
}
