import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { OutputDestinations } from './output-destinations';
import { RequestRecord } from './request-record.entity';

export interface OutputRetentionOptions {
  intervalMs: number;
  /** Records handled per transaction. @default 100 */
  batchSize?: number;
}

/**
 * Deletes managed outputs whose time is up (docs/api-contract.md: sync links about 1 h, async results 10
 * days by default). Each pass locks its batch with SKIP LOCKED, so several servers share the
 * work without a leader, and marks a record only after its files are gone: a crash between
 * the two leaves the record due and the next pass deletes again (deletes are idempotent).
 */
export class OutputRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<number> | null = null;

  constructor(
    private readonly dataSource: DataSource,
    private readonly destinations: OutputDestinations,
    private readonly options: OutputRetentionOptions,
    private readonly logger: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.runOnce(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One pass; resolves with the number of records whose outputs were deleted. */
  runOnce(): Promise<number> {
    this.running ??= this.pass().catch((error) => {
      this.logger.error({ err: error }, 'output retention pass failed');
      return 0;
    }).finally(() => (this.running = null));
    return this.running;
  }

  private async pass(): Promise<number> {
    return await this.dataSource.transaction(async (manager) => {
      const due = await manager.createQueryBuilder(RequestRecord, 'record')
        .where('record.outputs_expire_at < clock_timestamp() AND record.outputs_deleted_at IS NULL')
        .orderBy('record.outputs_expire_at', 'ASC')
        .limit(this.options.batchSize ?? 100)
        .setLock('pessimistic_write').setOnLocked('skip_locked')
        .getMany();
      const store = this.destinations.managed;
      for (const record of due) await Promise.all(record.outputKeys.map((key) => store.delete(key)));
      if (due.length > 0) {
        await manager.createQueryBuilder().update(RequestRecord)
          .set({ outputsDeletedAt: () => 'clock_timestamp()' })
          .whereInIds(due.map((record) => record.id))
          .execute();
      }
      return due.length;
    });
  }
}
