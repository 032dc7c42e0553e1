import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';

export type CostGrouping = 'day' | 'deployment' | 'replica';
export type UsageGrouping = 'day' | 'deployment' | 'api_key';

export interface CostRow {
  /** The day (YYYY-MM-DD, UTC), deployment id or replica id. */
  key: string;
  gpuHours: number;
  amount: number;
}

export interface UsageRow {
  key: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

const COST_KEYS: Record<CostGrouping, string> = {
  day: `to_char(period_start AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  deployment: 'deployment_id',
  replica: 'replica_id',
};
const USAGE_KEYS: Record<UsageGrouping, string> = {
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  deployment: 'deployment_id',
  api_key: 'api_key_id',
};
const MAX_RANGE_DAYS = 366;

/**
 * What a workspace spent and used, for a time range: GPU cost from the billing ledger (a
 * period belongs to the day it started in), and token usage from usage records.
 */
export class BillingQueries {
  /** `creditChanged`: caches that hold a workspace's credit state (its keys' lookups) forget it. */
  constructor(private readonly dataSource: DataSource, private readonly creditChanged: () => void = () => {}) {}

  async costs(workspaceId: string, from: Date, to: Date, groupBy: CostGrouping): Promise<CostRow[]> {
    checkRange(from, to);
    const rows: Array<{ key: string; gpu_hours: string; amount: string }> = await this.dataSource.query(`
      SELECT ${COST_KEYS[groupBy]} AS key, sum(extract(epoch FROM period_end - period_start)) / 3600 AS gpu_hours, sum(amount) AS amount
      FROM billing_ledger WHERE workspace_id = $1 AND period_start >= $2 AND period_start < $3
      GROUP BY 1 ORDER BY 1`, [workspaceId, from, to]);
    return rows.map((row) => ({ key: row.key, gpuHours: Number(row.gpu_hours), amount: Number(row.amount) }));
  }

  async usage(workspaceId: string, from: Date, to: Date, groupBy: UsageGrouping): Promise<UsageRow[]> {
    checkRange(from, to);
    const rows: Array<{ key: string; requests: string; prompt: string; completion: string; total: string }> = await this.dataSource.query(`
      SELECT ${USAGE_KEYS[groupBy]} AS key, count(*) AS requests, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, sum(total_tokens) AS total
      FROM usage_records WHERE workspace_id = $1 AND created_at >= $2 AND created_at < $3
      GROUP BY 1 ORDER BY 1`, [workspaceId, from, to]);
    return rows.map((row) => ({
      key: row.key, requests: Number(row.requests), promptTokens: Number(row.prompt), completionTokens: Number(row.completion), totalTokens: Number(row.total),
    }));
  }

  /** The prepaid balance (null: postpaid, no limit). */
  async creditBalance(workspaceId: string): Promise<number | null> {
    const [row] = await this.dataSource.query('SELECT credit_balance FROM workspaces WHERE id = $1', [workspaceId]);
    if (!row) throw new AppError('not_found', `no workspace '${workspaceId}'`, { param: 'workspaceId' });
    return row.credit_balance === null ? null : Number(row.credit_balance);
  }

  /** Operator: adds prepaid credit (a workspace without a balance starts from 0). */
  async addCredit(workspaceId: string, amount: number): Promise<number> {
    if (!Number.isFinite(amount) || amount <= 0 || amount > 1_000_000) {
      throw new AppError('invalid_request', 'amount must be a positive number up to 1000000', { param: 'amount' });
    }
    const [rows] = await this.dataSource.query(
      'UPDATE workspaces SET credit_balance = COALESCE(credit_balance, 0) + $2 WHERE id = $1 RETURNING credit_balance', [workspaceId, amount]);
    if (!rows?.length) throw new AppError('not_found', `no workspace '${workspaceId}'`, { param: 'workspaceId' });
    this.creditChanged();
    return Number(rows[0].credit_balance);
  }
}

function checkRange(from: Date, to: Date): void {
  if (!(from instanceof Date) || Number.isNaN(from.getTime()) || !(to instanceof Date) || Number.isNaN(to.getTime())) {
    throw new AppError('invalid_request', 'from and to must be dates', { param: 'from' });
  }
  if (to <= from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * 86_400_000) {
    throw new AppError('invalid_request', `a range may span at most ${MAX_RANGE_DAYS} days`, { param: 'to' });
  }
}
