import type { EntityManager } from 'typeorm';
import type { AppError } from '../errors/app-error';
import type { BudgetName, BudgetScope } from './budget-kinds';
import { budgetRefusal } from './budget-refusal';
import type { LimitSource, RefusalListener } from './tenant-budget';

/** How long a client should wait before retrying a stored quota: it frees up only when something is deleted or ends. */
const STORED_RETRY_AFTER_SECONDS = 60;

/**
 * The stored half of the tenant budget: what a workspace keeps (files and their bytes, batches
 * not yet ended, deployments, local replicas), counted from its rows when it adds more. A count
 * and the insert it allows run in one transaction under a lock per workspace and budget, so
 * parallel creates cannot all pass a count that sees none of the others (20 parallel uploads at
 * 999 files of 1,000 would otherwise all be stored).
 */
export class StoredQuotas {
  constructor(private readonly limits: LimitSource, private readonly refused: RefusalListener = () => {}) {}

  /**
   * Inside `manager`'s transaction: waits for the workspace's lock on `name`, counts what it
   * holds with `count`, and throws the refusal (429 `budget_exceeded`, naming the budget) when
   * `adding` more would pass its limit. The caller inserts in the same transaction.
   */
  async hold(manager: EntityManager, name: BudgetName, workspaceId: string, count: (manager: EntityManager) => Promise<number>, adding = 1): Promise<void> {
    await manager.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`budget:${name}:${workspaceId}`]);
    const refusal = this.refusal(name, 'workspace', workspaceId, await count(manager), adding);
    if (refusal) throw refusal;
  }

  /** The refusal when `used` + `adding` passes the limit of `name` in `scope`, else null (no lock: a caller that already serializes). */
  refusal(name: BudgetName, scope: BudgetScope, workspaceId: string | null, used: number, adding = 1): AppError | null {
    const limit = this.limits.limitFor(name, scope, workspaceId);
    if (used + adding <= limit) return null;
    this.refused(name, scope);
    return budgetRefusal(name, scope, used, limit, STORED_RETRY_AFTER_SECONDS);
  }
}
