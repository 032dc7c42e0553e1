import type { Logger } from 'pino';

/** Rows deleted per statement: short transactions, so a sweep never holds many locks at once. */
const BATCH = 1_000;

/** Deletes up to `limit` rows whose time is up; resolves with how many it deleted. */
export type DeleteDue = (limit: number) => Promise<number>;

/**
 * Deletes a table's rows past their retention every `intervalMs`, a batch at a time until none
 * is left (stored responses, the metrics history, the request log). Every server sweeps; the
 * delete statements take their rows FOR UPDATE SKIP LOCKED, so servers share the work without
 * a leader.
 */
export class RetentionSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | null = null;

  constructor(private readonly what: string, private readonly deleteDue: DeleteDue, private readonly intervalMs: number, private readonly logger: Logger) {}

  /**
   * The rows older than `retentionDays` by `deleteBefore` (a store whose rows carry a creation
   * time rather than an expiry).
   */
  static olderThan(retentionDays: number, deleteBefore: (before: Date, limit: number) => Promise<number>, now: () => number = Date.now): DeleteDue {
    return (limit) => deleteBefore(new Date(now() - retentionDays * 86_400_000), limit);
  }

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep to the end of what is due; resolves with the number of rows deleted. */
  runOnce(): Promise<number> {
    this.running ??= this.sweep().catch((error) => {
      this.logger.error({ err: error }, `${this.what} retention sweep failed`);
      return 0;
    }).finally(() => (this.running = null));
    return this.running;
  }

  private async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await this.deleteDue(BATCH);
      total += deleted;
      if (deleted < BATCH) return total;
    }
  }
}
