/**
 * Per-job flow control (proto/PROTOCOL.md, "Flow control"): a streamed job may have at most
 * `Assign.stream_window_bytes` chunk bytes sent and not yet credited by the control plane,
 * which credits them once its client took them. The job's engine awaits the promise `sent`
 * hands back before reading more, so a client that stops reading stops its own job only: the
 * stream it shares with every other job of the agent keeps flowing.
 */
export class StreamWindow {
  /** Chunk bytes sent and not credited yet. */
  private outstanding = 0;
  private waiting: Promise<void> | undefined;
  private resume: (() => void) | undefined;
  private fail: ((reason: Error) => void) | undefined;
  private closedWith: Error | undefined;

  constructor(private readonly sizeBytes: number) {}

  /** Chunk bytes just sent; a promise while the window is full: resolved by credit, rejected by `close`. */
  sent(bytes: number): Promise<void> | undefined {
    this.outstanding += bytes;
    if (this.outstanding < this.sizeBytes) return undefined;
    if (this.closedWith) return Promise.reject(this.closedWith);
    if (!this.waiting) {
      this.waiting = new Promise<void>((resolve, reject) => {
        this.resume = resolve;
        this.fail = reject;
      });
      // An engine that stopped awaiting (it failed meanwhile) must not turn close() into an unhandled rejection.
      this.waiting.catch(() => undefined);
    }
    return this.waiting;
  }

  /** The consumer took `bytes` more: the engine may go on once the window has room. */
  credit(bytes: number): void {
    this.outstanding = Math.max(0, this.outstanding - bytes);
    if (this.outstanding < this.sizeBytes) this.settle()?.resume();
  }

  /** The job ended or was aborted: an engine waiting for credit unwinds with `reason`. */
  close(reason: Error): void {
    this.closedWith ??= reason;
    this.settle()?.fail(reason);
  }

  private settle(): { resume: () => void; fail: (reason: Error) => void } | undefined {
    const { resume, fail } = this;
    this.waiting = undefined;
    this.resume = undefined;
    this.fail = undefined;
    return resume && fail ? { resume, fail } : undefined;
  }
}
