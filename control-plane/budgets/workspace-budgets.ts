import type { DataSource, EntityManager } from 'typeorm';
import { CLUSTER_CHANNEL, clusterMessage, type ClusterNotifier } from '../events/cluster-notifier';
import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import { BUDGET_NAMES, BUDGETS, isBudgetName, OVERRIDABLE_SCOPES, type BudgetName, type BudgetScope, type OverridableScope } from './budget-kinds';
import type { BudgetLimits } from './budget-config';
import type { LimitSource } from './tenant-budget';
import { WorkspaceBudget } from './workspace-budget.entity';

/** One budget's limit in one scope, as a workspace has it. */
export interface EffectiveLimit {
  readonly budget: BudgetName;
  readonly scope: BudgetScope;
  readonly limit: number;
  readonly default: number;
  /** Set by the operator for this workspace. */
  readonly overridden: boolean;
}

/**
 * The limits each workspace has: the defaults (budget-config.ts) and what the operator set for
 * it (`workspace_budgets`). Every override is kept in memory, so the request path reads a limit
 * without the database: there are few (one per changed setting), and a change reaches every
 * server through the cluster notifier (topic `budget`, the workspace id), a lost notification
 * connection through a full reload.
 */
export class WorkspaceBudgets implements LimitSource {
  private overrides = new Map<string, Map<string, number>>();

  constructor(private readonly dataSource: DataSource, private readonly defaults: BudgetLimits, private readonly notifier: Pick<ClusterNotifier, 'on' | 'onReset' | 'publish'> | null) {}

  async start(): Promise<void> {
    await this.reloadAll();
    this.notifier?.on('budget', (workspaceId) => void this.reload(workspaceId).catch(() => {}));
    this.notifier?.onReset(() => void this.reloadAll().catch(() => {}));
  }

  limitFor(name: BudgetName, scope: BudgetScope, workspaceId: string | null | undefined): number {
    if (workspaceId) {
      const set = this.overrides.get(workspaceId)?.get(`${name}:${scope}`);
      if (set !== undefined) return set;
    }
    return this.defaults[name][scope] ?? Number.POSITIVE_INFINITY;
  }

  /** Every budget and scope with the workspace's limit in it (GraphQL). */
  effective(workspaceId: string): EffectiveLimit[] {
    const limits: EffectiveLimit[] = [];
    for (const budget of BUDGET_NAMES) {
      for (const scope of Object.keys(BUDGETS[budget].limits) as BudgetScope[]) {
        const fallback = this.defaults[budget][scope] ?? 0;
        const set = this.overrides.get(workspaceId)?.get(`${budget}:${scope}`);
        limits.push({ budget, scope, limit: set ?? fallback, default: fallback, overridden: set !== undefined });
      }
    }
    return limits;
  }

  /**
   * The operator's limit for one workspace (null: back to the default). Only the per-key and
   * per-workspace scopes of a budget that has them; a server's own limits are its settings.
   */
  async set(workspaceId: string, budget: unknown, scope: unknown, limit: number | null, manager?: EntityManager): Promise<void> {
    if (!isBudgetName(budget)) throw new AppError('invalid_request', `budget must be one of ${BUDGET_NAMES.join(', ')}; got ${quoteValue(budget)}`, { param: 'budget' });
    const scopes = OVERRIDABLE_SCOPES.filter((candidate) => candidate in BUDGETS[budget].limits);
    if (!scopes.includes(scope as OverridableScope)) {
      throw new AppError('invalid_request', `scope of budget '${budget}' must be ${scopes.join(' or ') || 'nothing: it has only server-wide limits'}; got ${quoteValue(scope)}`, { param: 'scope' });
    }
    if (limit !== null && (!Number.isSafeInteger(limit) || limit < 0)) {
      throw new AppError('invalid_request', `value must be a whole number of at least 0, or null for the default; got ${quoteValue(limit)}`, { param: 'value' });
    }
    const target = manager ?? this.dataSource.manager;
    const [workspace] = await target.query('SELECT id FROM workspaces WHERE id = $1 AND deleted_at IS NULL', [workspaceId]);
    if (!workspace) throw new AppError('not_found', `no workspace '${quoteValue(workspaceId)}'`, { param: 'workspaceId' });
    if (limit === null) {
      await target.query('DELETE FROM workspace_budgets WHERE workspace_id = $1 AND budget = $2 AND scope = $3', [workspaceId, budget, scope]);
    } else {
      await target.query(`INSERT INTO workspace_budgets (workspace_id, budget, scope, limit_value) VALUES ($1, $2, $3, $4)
        ON CONFLICT (workspace_id, budget, scope) DO UPDATE SET limit_value = excluded.limit_value, updated_at = now()`, [workspaceId, budget, scope, limit]);
    }
    if (manager) {
      // Inside a caller's transaction: every server, this one included, reloads once it commits.
      await manager.query('SELECT pg_notify($1, $2)', [CLUSTER_CHANNEL, clusterMessage('budget', workspaceId)]);
      return;
    }
    await this.reload(workspaceId);
    this.notifier?.publish('budget', workspaceId);
  }

  async reload(workspaceId: string): Promise<void> {
    const rows = await this.dataSource.getRepository(WorkspaceBudget).find({ where: { workspaceId } });
    if (rows.length === 0) this.overrides.delete(workspaceId);
    else this.overrides.set(workspaceId, new Map(rows.map((row) => [`${row.budget}:${row.scope}`, Number(row.limit)])));
  }

  private async reloadAll(): Promise<void> {
    const rows = await this.dataSource.getRepository(WorkspaceBudget).find();
    const next = new Map<string, Map<string, number>>();
    for (const row of rows) {
      const limits = next.get(row.workspaceId) ?? new Map<string, number>();
      limits.set(`${row.budget}:${row.scope}`, Number(row.limit));
      next.set(row.workspaceId, limits);
    }
    this.overrides = next;
  }
}
