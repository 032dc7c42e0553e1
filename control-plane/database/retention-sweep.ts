import type { Logger } from 'pino';

/** Rows deleted per statement: short transactions, so a sweep never holds many locks at once. */
const BATCH = 1_000;

/** Deletes up to `limit` rows older than `before`; resolves with how many it deleted. */
export type DeleteOlder = (before: Date, limit: number) => Promise<number>;

/**
 * Deletes a table's rows past their retention (`retentionDays`) every `intervalMs`, a batch at
 * a time until none is left, as ResponseRetention does for stored responses. Every server
 * sweeps; the delete statements take their rows FOR UPDATE SKIP LOCKED, so servers share the
 * work without a leader.
 */
export class RetentionSweep {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | null = null;

  constructor(
    private readonly what: string,
    private readonly deleteOlder: DeleteOlder,
    private readonly options: { retentionDays: number; intervalMs: number },
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.options.intervalMs);
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
    const before = new Date(this.now() - this.options.retentionDays * 86_400_000);
    let total = 0;
    for (;;) {
      const deleted = await this.deleteOlder(before, BATCH);
      total += deleted;
      if (deleted < BATCH) return total;
    }
  }
}
