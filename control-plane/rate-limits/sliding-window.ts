/**
 * An exact sliding-window log: the timestamps of the requests admitted in the last
 * `windowMs`, in a ring. A request is admitted iff fewer than `limit` fall in the window, so
 * the limit neither fires early nor lets a burst through at a window edge. O(1) amortised.
 * The ring grows with the traffic actually seen (doubling, up to `limit`), not with the limit:
 * a key allowed 10 million requests a minute that sends 10 holds 16 slots, not 80 MB.
 */
const INITIAL_CAPACITY = 16;

export class SlidingWindowLog {
  private times: Float64Array;
  private start = 0;
  private count = 0;

  constructor(private limit: number, private readonly windowMs: number) {
    this.times = new Float64Array(Math.min(limit, INITIAL_CAPACITY));
  }

  /** Admits and records one request, or says how long until one would be admitted. */
  tryAcquire(now: number, limit: number): { allowed: boolean; remaining: number; resetMs: number } {
    if (limit !== this.limit) this.resize(limit);
    this.expire(now);
    if (this.count >= this.limit) {
      return { allowed: false, remaining: 0, resetMs: this.times[this.start] + this.windowMs - now };
    }
    if (this.count === this.times.length) this.grow(Math.min(this.limit, this.times.length * 2));
    this.times[(this.start + this.count) % this.times.length] = now;
    this.count++;
    return { allowed: true, remaining: this.limit - this.count, resetMs: this.times[this.start] + this.windowMs - now };
  }

  /** How long until a request would be admitted (0: now), recording nothing. */
  waitMs(now: number, limit: number): number {
    if (limit !== this.limit) this.resize(limit);
    this.expire(now);
    return this.count >= this.limit ? this.times[this.start] + this.windowMs - now : 0;
  }

  private expire(now: number): void {
    const cutoff = now - this.windowMs;
    const capacity = this.times.length;
    while (this.count > 0 && this.times[this.start] <= cutoff) {
      this.start = (this.start + 1) % capacity;
      this.count--;
    }
  }

  /** A new limit keeps the most recent requests that still fit under it. */
  private resize(limit: number): void {
    const keep = Math.min(this.count, limit);
    this.start = (this.start + this.count - keep) % this.times.length;
    this.count = keep;
    this.limit = limit;
    this.grow(Math.max(Math.min(limit, INITIAL_CAPACITY), keep));
  }

  /** Copies the live entries, oldest first, into a ring of `capacity` slots. */
  private grow(capacity: number): void {
    const next = new Float64Array(capacity);
    for (let index = 0; index < this.count; index++) next[index] = this.times[(this.start + index) % this.times.length];
    this.times = next;
    this.start = 0;
  }
}
