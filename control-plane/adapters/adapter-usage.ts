import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';

export interface AdapterUsageTotals {
  readonly requests: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
}

/** Longest range one read sums (the usage query's own bound is the same order). */
const MAX_RANGE_MS = 366 * 24 * 3_600_000;

/** An adapter's requests and tokens in a range, from the usage records that carry its id (its owner's and guests'). */
export class AdapterUsage {
  constructor(private readonly dataSource: DataSource) {}

  async of(workspaceId: string, adapterId: string, from: Date, to: Date): Promise<AdapterUsageTotals> {
    if (!(from.getTime() < to.getTime())) throw new AppError('invalid_request', 'from must be before to', { param: 'from' });
    if (to.getTime() - from.getTime() > MAX_RANGE_MS) throw new AppError('invalid_request', 'the range may span at most 366 days', { param: 'to' });
    // adapter ids are unique across workspaces: a guest's records carry the owner's adapter, counted here for its owner.
    const [row] = await this.dataSource.query(`
      SELECT count(*) AS requests, coalesce(sum(prompt_tokens), 0) AS prompt, coalesce(sum(completion_tokens), 0) AS completion, coalesce(sum(total_tokens), 0) AS total
      FROM usage_records WHERE adapter_id = $1 AND created_at >= $2 AND created_at < $3
        AND EXISTS (SELECT 1 FROM adapters WHERE id = $1 AND workspace_id = $4)`, [adapterId, from, to, workspaceId]);
    return { requests: Number(row.requests), promptTokens: Number(row.prompt), completionTokens: Number(row.completion), totalTokens: Number(row.total) };
  }
}
