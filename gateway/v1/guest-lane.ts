/**
 * Guest attempts wait their turn behind the owners' work on the event loop. Every request's
 * HTTP parsing happens where node:http does it (the poll phase, in arrival order), but the
 * rest of a guest attempt (authentication, the body, the screen, the answer and its write) is
 * started here, at most `perTurn` of them per event-loop turn (a `setImmediate`, which runs
 * after the turn's I/O): a burst of hundreds of guest attempts (a flood of closed loops that
 * were all refused together comes back together) is spread over many turns, and an owner's
 * request or its agent's next chunk, arriving meanwhile, is handled in the next poll phase
 * instead of after the whole burst. Guests wait a little longer for their 429; owners do not
 * wait for guests' refusals. Attempts start in arrival order. (Metering the guests'
 * connections' reads the same way, so their parsing waits too, cost ~8 µs more per attempt in
 * pause/resume and did not move the owner's tail: not done.)
 */
export class GuestLane {
  private queue: Array<() => void> = [];
  private head = 0;
  private scheduled = false;

  constructor(private readonly perTurn: number) {}

  /** Starts `work` in a later turn (this one, if nothing waits and the turn allows: never synchronously). */
  run(work: () => void): void {
    this.queue.push(work);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(this.drain);
    }
  }

  /** Attempts waiting for their turn. */
  get waiting(): number {
    return this.queue.length - this.head;
  }

  private readonly drain = (): void => {
    const end = Math.min(this.queue.length, this.head + this.perTurn);
    while (this.head < end) {
      const work = this.queue[this.head];
      this.queue[this.head++] = undefined!;
      try {
        work();
      } catch {
        // A start that throws is its own failure: it must not stop the lane (the callers' work catches its own errors).
      }
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
      this.scheduled = false;
    } else {
      if (this.head > 1_024) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      setImmediate(this.drain);
    }
  };
}
