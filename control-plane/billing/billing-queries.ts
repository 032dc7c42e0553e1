import type { DataSource } from 'typeorm';
import { retryTransaction } from '../database/retry-transaction';
import { AppError } from '../errors/app-error';
import { LEDGER_KINDS, type LedgerKind } from './ledger-entry.entity';
import { canonicalMoney, parseTopUp, type Money } from './money';
import { RecordLabels } from './record-labels';
import { topUp } from './top-up';

export type CostGrouping = 'day' | 'deployment' | 'replica';
export type UsageGrouping = 'day' | 'deployment' | 'api_key' | 'adapter';

export interface CostRow {
  /** The day (YYYY-MM-DD, UTC), deployment id or replica id. */
  key: string;
  /** By deployment: its model and slug (record-labels.ts); else null. */
  label: string | null;
  gpuHours: number;
  /** What the GPU time cost (positive). */
  amount: Money;
}

export interface UsageRow {
  /** The day (YYYY-MM-DD, UTC), API key id, or deployment id; a guest's calls are grouped by the shared model they called (`shared/<model-id>`). */
  key: string;
  /** By deployment: its model and slug; by API key: its name and prefix (record-labels.ts); by day, or a shared model: null. */
  label: string | null;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
}

export type EarningsGrouping = 'day' | 'deployment';

export interface EarningsRow {
  /** The day (YYYY-MM-DD, UTC) or the owner's deployment id. */
  key: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  earnings: Money;
}

export interface LedgerQuery {
  from: Date;
  to: Date;
  kind?: string | null;
  /** 1 to MAX_LEDGER_ROWS. @default 50 */
  limit?: number | null;
}

/** A ledger row as its workspace sees it. */
export interface LedgerRow {
  kind: LedgerKind;
  /** Signed effect on the balance. */
  amount: Money;
  modelId: string | null;
  /** gpu_time and owner_credit rows; null on guest_debit rows (the owner's deployment is not the guest's business). */
  deploymentId: string | null;
  /** The deployment's model and slug (record-labels.ts), when the row names one. */
  deploymentLabel: string | null;
  replicaId: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  pricePerHour: Money | null;
  periodStart: Date | null;
  periodEnd: Date | null;
  createdAt: Date;
}

export const MAX_LEDGER_ROWS = 200;

const COST_KEYS: Record<CostGrouping, string> = {
  day: `to_char(period_start AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  deployment: 'deployment_id',
  replica: 'replica_id',
};
const USAGE_KEYS: Record<UsageGrouping, string> = {
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  // A guest's record names the owner's deployment that served it: its workspace sees the shared model it called instead.
  deployment: 'coalesce(shared_model, deployment_id)',
  api_key: 'api_key_id',
  // The base model's requests are one group, keyed '' (labelled "base model").
  adapter: `coalesce(adapter_id, '')`,
};
const EARNINGS_KEYS: Record<EarningsGrouping, string> = {
  day: `to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  deployment: 'deployment_id',
};
const MAX_RANGE_DAYS = 366;

/**
 * What a workspace spent and used, for a time range: GPU cost from the billing ledger (a
 * period belongs to the day it started in), token usage from usage records, the ledger's rows
 * and the earnings of shared deployments; and its prepaid credit.
 */
export class BillingQueries {
  private readonly labels: RecordLabels;

  /** `creditChanged`: caches that hold a workspace's credit state (its keys' lookups) forget it. */
  constructor(private readonly dataSource: DataSource, private readonly creditChanged: () => void = () => {}) {
    this.labels = new RecordLabels(dataSource);
  }

  async costs(workspaceId: string, from: Date, to: Date, groupBy: CostGrouping): Promise<CostRow[]> {
    checkRange(from, to);
    const rows: Array<{ key: string; gpu_hours: string; amount: string }> = await this.dataSource.query(`
      SELECT ${COST_KEYS[groupBy]} AS key, sum(extract(epoch FROM period_end - period_start)) / 3600 AS gpu_hours, -sum(amount) AS amount
      FROM billing_ledger WHERE workspace_id = $1 AND kind = 'gpu_time' AND period_start >= $2 AND period_start < $3
      GROUP BY 1 ORDER BY 1`, [workspaceId, from, to]);
    const labels = groupBy === 'deployment' ? await this.labels.deployments(workspaceId, rows.map((row) => row.key)) : new Map<string, string>();
    return rows.map((row) => ({ key: row.key, label: labels.get(row.key) ?? null, gpuHours: Number(row.gpu_hours), amount: canonicalMoney(row.amount) }));
  }

  async usage(workspaceId: string, from: Date, to: Date, groupBy: UsageGrouping): Promise<UsageRow[]> {
    checkRange(from, to);
    const rows: Array<{ key: string; requests: string; prompt: string; completion: string; total: string }> = await this.dataSource.query(`
      SELECT ${USAGE_KEYS[groupBy]} AS key, count(*) AS requests, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, sum(total_tokens) AS total
      FROM usage_records WHERE workspace_id = $1 AND created_at >= $2 AND created_at < $3
      GROUP BY 1 ORDER BY 1`, [workspaceId, from, to]);
    const keys = rows.map((row) => row.key);
    const labels = groupBy === 'deployment' ? await this.labels.deployments(workspaceId, keys)
      : groupBy === 'api_key' ? await this.labels.apiKeys(workspaceId, keys)
        : groupBy === 'adapter' ? await this.labels.adapters(workspaceId, keys) : new Map<string, string>();
    return rows.map((row) => ({
      key: row.key, label: labels.get(row.key) ?? null,
      requests: Number(row.requests), promptTokens: Number(row.prompt), completionTokens: Number(row.completion), totalTokens: Number(row.total),
    }));
  }

  /** The prepaid balance (null: postpaid, no limit). */
  async creditBalance(workspaceId: string): Promise<Money | null> {
    const [row] = await this.dataSource.query('SELECT credit_balance FROM workspaces WHERE id = $1', [workspaceId]);
    if (!row) throw new AppError('not_found', `no workspace '${workspaceId}'`, { param: 'workspaceId' });
    return row.credit_balance === null ? null : canonicalMoney(row.credit_balance);
  }

  /**
   * Operator: adds prepaid credit (a decimal string, or a number read through its shortest
   * form), writing the `top_up` row in the same transaction. A postpaid workspace starts from
   * 0. Returns the new balance.
   */
  async addCredit(workspaceId: string, amount: unknown): Promise<Money> {
    const credit = parseTopUp(amount, 'amount');
    const balance = await retryTransaction(this.dataSource, (manager) => topUp(manager, workspaceId, credit));
    this.creditChanged();
    return balance;
  }

  /** The workspace's ledger rows, newest first. A guest_debit row names the model, never the deployment or workspace that served it. */
  async ledgerEntries(workspaceId: string, query: LedgerQuery): Promise<LedgerRow[]> {
    checkRange(query.from, query.to);
    if (query.kind != null && !LEDGER_KINDS.includes(query.kind as LedgerKind)) {
      throw new AppError('invalid_request', `kind must be one of ${LEDGER_KINDS.join(', ')}`, { param: 'kind' });
    }
    const limit = query.limit ?? 50;
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LEDGER_ROWS) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LEDGER_ROWS}`, { param: 'limit' });
    }
    const rows: Array<Record<string, any>> = await this.dataSource.query(`
      SELECT kind, amount, model_id, prompt_tokens, completion_tokens, price_per_hour, period_start, period_end, created_at,
        CASE WHEN kind = 'guest_debit' THEN NULL ELSE deployment_id END AS deployment_id, replica_id
      FROM billing_ledger WHERE workspace_id = $1 AND created_at >= $2 AND created_at < $3 AND ($4::text IS NULL OR kind = $4)
      ORDER BY created_at DESC, id DESC LIMIT $5`, [workspaceId, query.from, query.to, query.kind ?? null, limit]);
    const labels = await this.labels.deployments(workspaceId, rows.map((row) => row.deployment_id).filter((id): id is string => id !== null));
    return rows.map((row) => ({
      kind: row.kind, amount: canonicalMoney(row.amount), modelId: row.model_id, deploymentId: row.deployment_id,
      deploymentLabel: row.deployment_id === null ? null : labels.get(row.deployment_id) ?? null, replicaId: row.replica_id,
      promptTokens: row.prompt_tokens, completionTokens: row.completion_tokens,
      pricePerHour: row.price_per_hour === null ? null : canonicalMoney(row.price_per_hour),
      periodStart: row.period_start, periodEnd: row.period_end, createdAt: row.created_at,
    }));
  }

  /** What guests paid for the workspace's shared deployments (owner_credit rows), by day (UTC) or deployment. */
  async sharingEarnings(workspaceId: string, from: Date, to: Date, groupBy: EarningsGrouping): Promise<EarningsRow[]> {
    checkRange(from, to);
    const rows: Array<{ key: string; requests: string; prompt: string; completion: string; earnings: string }> = await this.dataSource.query(`
      SELECT ${EARNINGS_KEYS[groupBy]} AS key, count(*) AS requests, sum(prompt_tokens) AS prompt, sum(completion_tokens) AS completion, sum(amount) AS earnings
      FROM billing_ledger WHERE workspace_id = $1 AND kind = 'owner_credit' AND created_at >= $2 AND created_at < $3
      GROUP BY 1 ORDER BY 1`, [workspaceId, from, to]);
    return rows.map((row) => ({
      key: row.key, requests: Number(row.requests), promptTokens: Number(row.prompt), completionTokens: Number(row.completion), earnings: canonicalMoney(row.earnings),
    }));
  }
}

export function checkRange(from: Date, to: Date): void {
  if (!(from instanceof Date) || Number.isNaN(from.getTime()) || !(to instanceof Date) || Number.isNaN(to.getTime())) {
    throw new AppError('invalid_request', 'from and to must be dates', { param: 'from' });
  }
  if (to <= from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * 86_400_000) {
    throw new AppError('invalid_request', `a range may span at most ${MAX_RANGE_DAYS} days`, { param: 'to' });
  }
}
