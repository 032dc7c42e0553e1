import type { Logger } from 'pino';
import type { ResponseStore } from './response-store';

/** Rows deleted per statement: short transactions, so a sweep never holds many locks at once. */
const BATCH = 1_000;

/**
 * Deletes stored responses past their retention (RESPONSES_RETENTION_DAYS). Reads already hide
 * them (ResponseStore scopes by `expires_at`); this frees the rows. Every server sweeps; SKIP
 * LOCKED lets them share the work without a leader.
 */
export class ResponseRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | null = null;

  constructor(private readonly store: ResponseStore, private readonly intervalMs: number, private readonly logger: Logger) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep to the end of what is due; resolves with the number of responses deleted. */
  runOnce(): Promise<number> {
    this.running ??= this.sweep().catch((error) => {
      this.logger.error({ err: error }, 'responses retention sweep failed');
      return 0;
    }).finally(() => (this.running = null));
    return this.running;
  }

  private async sweep(): Promise<number> {
    let total = 0;
    for (;;) {
      const deleted = await this.store.deleteExpired(BATCH);
      total += deleted;
      if (deleted < BATCH) return total;
    }
  }
}
