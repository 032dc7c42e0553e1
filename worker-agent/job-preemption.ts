/**
 * A batch line set aside for a live job (job-runner.ts) on an engine that suspends work: while
 * the line is paused its engine time stands still, and taking it up again costs the engine the
 * line's prefill once more, as vLLM's recompute preemption does (the line's KV cache went to the
 * live job). One engine call waits on it at a time.
 */
export class JobPreemption {
  /** Times the line was paused. */
  times = 0;
  private paused = false;
  /** Wakes the engine call waiting now (a pause interrupts its timer, a resume its wait). */
  private wake: (() => void) | null = null;

  get isPaused(): boolean {
    return this.paused;
  }

  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.times += 1;
    this.wake?.();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.wake?.();
  }

  /**
   * Waits `milliseconds` of the job's engine time: time paused does not count, and each resume
   * adds `resumeCostMs` (the prefill recomputed). Rejects with the signal's reason on abort,
   * paused or not.
   */
  async sleep(milliseconds: number, resumeCostMs: number, signal?: AbortSignal): Promise<void> {
    let left = milliseconds;
    for (;;) {
      signal?.throwIfAborted();
      if (this.paused) {
        await this.wait(Infinity, signal);
        if (!this.paused) left += resumeCostMs;
        continue;
      }
      if (left <= 0) return;
      const from = performance.now();
      await this.wait(left, signal);
      left -= performance.now() - from;
    }
  }

  private wait(milliseconds: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', aborted);
        this.wake = null;
      };
      const aborted = (): void => {
        settle();
        reject(signal!.reason);
      };
      this.wake = () => {
        settle();
        resolve();
      };
      signal?.addEventListener('abort', aborted, { once: true });
      if (milliseconds !== Infinity) timer = setTimeout(this.wake, milliseconds);
    });
  }
}
