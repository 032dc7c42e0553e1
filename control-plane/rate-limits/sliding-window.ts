/**
 * An exact sliding-window log: the timestamps of the last `limit` admitted requests in a
 * ring. A request is admitted iff fewer than `limit` fall in the last `windowMs`, so the
 * limit neither fires early nor lets a burst through at a window edge. O(1) amortised.
 */
export class SlidingWindowLog {
  private times: Float64Array;
  private start = 0;
  private count = 0;

  constructor(private limit: number, private readonly windowMs: number) {
    this.times = new Float64Array(limit);
  }

  /** Admits and records one request, or says how long until one would be admitted. */
  tryAcquire(now: number, limit: number): { allowed: boolean; remaining: number; resetMs: number } {
    if (limit !== this.limit) this.resize(limit);
    this.expire(now);
    if (this.count >= this.limit) {
      return { allowed: false, remaining: 0, resetMs: this.times[this.start] + this.windowMs - now };
    }
    this.times[(this.start + this.count) % this.limit] = now;
    this.count++;
    return { allowed: true, remaining: this.limit - this.count, resetMs: this.times[this.start] + this.windowMs - now };
  }

  private expire(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.count > 0 && this.times[this.start] <= cutoff) {
      this.start = (this.start + 1) % this.limit;
      this.count--;
    }
  }

  private resize(limit: number): void {
    const kept: number[] = [];
    for (let index = 0; index < this.count; index++) kept.push(this.times[(this.start + index) % this.limit]);
    const recent = kept.slice(Math.max(0, kept.length - limit));
    this.limit = limit;
    this.times = new Float64Array(limit);
    recent.forEach((time, index) => (this.times[index] = time));
    this.start = 0;
    this.count = recent.length;
  }
}
