import type { DataSource, Repository } from 'typeorm';
import { MoreThanOrEqual } from 'typeorm';
import type { Logger } from 'pino';
import { UsageRecord } from './usage-record.entity';

export type UsageInput = Omit<UsageRecord, 'id'>;

/**
 * Writes usage records in batches (one INSERT per `flushIntervalMs`) so metering costs the
 * request path nothing but an array push. A failed write keeps the batch for the next flush.
 */
export class UsageRecorder {
  private readonly records: Repository<UsageRecord>;
  private pending: UsageInput[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();

  constructor(dataSource: DataSource, private readonly flushIntervalMs: number, private readonly logger: Logger) {
    this.records = dataSource.getRepository(UsageRecord);
  }

  record(input: UsageInput): void {
    this.pending.push(input);
    if (!this.timer) this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs);
  }

  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    if (batch.length === 0) return await this.flushing;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      try {
        await this.records.insert(batch);
      } catch (error) {
        this.logger.error({ err: error, records: batch.length }, 'usage write failed; will retry');
        this.pending = batch.concat(this.pending);
        if (!this.timer) this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs * 4);
      }
    });
    await this.flushing;
  }

  /** Tokens recorded for a key since `since` (TPD accounting). */
  async tokensSince(apiKeyId: string, since: Date): Promise<number> {
    const row = await this.records.createQueryBuilder('usage')
      .select('COALESCE(SUM(usage.total_tokens), 0)', 'total')
      .where({ apiKeyId, createdAt: MoreThanOrEqual(since) })
      .getRawOne<{ total: string }>();
    return Number(row?.total ?? 0);
  }

  async list(workspaceId: string, limit = 100): Promise<UsageRecord[]> {
    return await this.records.find({ where: { workspaceId }, order: { id: 'DESC' }, take: limit });
  }

  async stop(): Promise<void> {
    await this.flush();
  }
}
