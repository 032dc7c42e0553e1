/**
 * The context's sequences (llama.cpp's parallel slots), handed out first come, first served.
 * A request takes one per choice, all at once, so an `n = 2` request never holds one slot
 * while waiting for another (two of them could otherwise deadlock each other).
 */
export class SequencePool<Sequence> {
  private readonly free: Sequence[];
  private readonly waiting: Array<{ count: number; resolve: (sequences: Sequence[]) => void }> = [];
  private lent = 0;

  constructor(sequences: readonly Sequence[]) {
    this.free = [...sequences];
  }

  get size(): number {
    return this.free.length + this.lent;
  }

  /** Resolves with `count` sequences; rejects with the signal's reason if it aborts first. */
  acquire(count: number, signal: AbortSignal): Promise<Sequence[]> {
    if (count > this.size) return Promise.reject(new RangeError(`asked for ${count} sequences of ${this.size}`));
    signal.throwIfAborted();
    if (this.waiting.length === 0 && this.free.length >= count) return Promise.resolve(this.take(count));
    return new Promise<Sequence[]>((resolve, reject) => {
      const waiter = {
        count,
        resolve: (sequences: Sequence[]) => {
          signal.removeEventListener('abort', onAbort);
          resolve(sequences);
        },
      };
      const onAbort = () => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(signal.reason);
        this.grant();
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  release(sequences: readonly Sequence[]): void {
    this.lent -= sequences.length;
    this.free.push(...sequences);
    this.grant();
  }

  private take(count: number): Sequence[] {
    this.lent += count;
    return this.free.splice(0, count);
  }

  /** Strict FIFO: a large request at the head is not starved by smaller ones behind it. */
  private grant(): void {
    while (this.waiting.length > 0 && this.free.length >= this.waiting[0].count) {
      const waiter = this.waiting.shift()!;
      waiter.resolve(this.take(waiter.count));
    }
  }
}
