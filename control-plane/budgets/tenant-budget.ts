import type { AppError } from '../errors/app-error';
import { BUDGETS, SCOPE_ORDER, type BudgetName, type BudgetScope } from './budget-kinds';
import { budgetRefusal } from './budget-refusal';

/**
 * Who holds a resource: every scope it is counted in. Unknown parts stay null (before a key is
 * known only the address is; a graphql-ws subscription knows its socket too).
 */
export interface BudgetHolder {
  readonly keyId?: string | null;
  readonly workspaceId?: string | null;
  readonly address?: string | null;
  readonly socket?: object | null;
  /** False leaves the server's own scope out (TenantBudget.take's `only`). @default true */
  readonly serverWide?: boolean;
}

/** What a limit is for one holder: the operator's per-workspace setting, else the default. */
export interface LimitSource {
  limitFor(name: BudgetName, scope: BudgetScope, workspaceId: string | null | undefined): number;
}

/** Told of every refusal (metrics: `inference_budget_refusals_total`). */
export type RefusalListener = (name: BudgetName, scope: BudgetScope) => void;

/** Something held: give it back exactly once (`release` again does nothing). */
export interface BudgetLease {
  readonly amount: number;
  /** Holds `more` too, under the same limits; the refusal (and nothing held) when they do not fit. */
  grow(more: number): AppError | null;
  /** Gives back `less` of what it holds (at most all of it) and keeps the rest. */
  shrink(less: number): void;
  release(): void;
}

type Counters = Map<unknown, number>;

/**
 * The held half of the tenant budget: resources a request, a socket or an operation holds while
 * it lasts, counted per key, workspace, client address, socket and this server. One instance per
 * server, shared by every surface (HTTP bodies and uploads, connections, graphql-ws sockets and
 * subscriptions, GraphQL operations). A hold is all or nothing across its scopes, and the
 * refusal names the budget and the scope that was full (budget-refusal.ts).
 *
 * Refusals are returned, not thrown: a flood is mostly refusals, and the fast lane answers them
 * without a throw (docs/performance.md). Everything is synchronous; nothing here waits.
 */
export class TenantBudget {
  private readonly counters = new Map<BudgetName, Map<BudgetScope, Counters>>();

  constructor(private readonly limits: LimitSource, private readonly refused: RefusalListener = () => {}) {}

  /**
   * Holds `amount` of `name` for `holder` in every scope it names and the server's, or returns
   * why not (nothing is held then). `only`: in that one scope alone (a connection's address
   * share, given back on its own once a key shows).
   */
  take(name: BudgetName, holder: BudgetHolder, amount = 1, only?: BudgetScope): BudgetLease | AppError {
    const scoped = only ? onlyIn(holder, only) : holder;
    const refusal = this.check(name, scoped, amount);
    if (refusal) return refusal;
    this.add(name, scoped, amount);
    return new Lease(this, name, scoped, amount);
  }

  /** What `holder` holds of `name` in `scope` now (tests, GraphQL's view of a workspace's budgets, metrics). */
  used(name: BudgetName, scope: BudgetScope, holder: BudgetHolder = {}): number {
    const id = scope === 'server' ? SERVER : idOf(holder, scope);
    if (id === null) return 0;
    return this.counters.get(name)?.get(scope)?.get(id) ?? 0;
  }

  /** @internal Lease's */
  check(name: BudgetName, holder: BudgetHolder, amount: number, own = 0): AppError | null {
    for (const scope of SCOPE_ORDER) {
      if (!(scope in BUDGETS[name].limits)) continue;
      const id = idOf(holder, scope);
      if (id === null) continue;
      const limit = this.limits.limitFor(name, scope, holder.workspaceId);
      const used = this.counters.get(name)?.get(scope)?.get(id) ?? 0;
      if (used + amount <= limit) continue;
      // One thing larger than a byte budget on its own is still taken (and may grow) while
      // nothing else is held there, so a size limit set above the budget works, one at a time.
      if (BUDGETS[name].unit === 'bytes' && used === own && limit > 0) continue;
      this.refused(name, scope);
      return budgetRefusal(name, scope, used, limit);
    }
    return null;
  }

  /** @internal Lease's */
  add(name: BudgetName, holder: BudgetHolder, amount: number): void {
    let byScope = this.counters.get(name);
    if (!byScope) this.counters.set(name, (byScope = new Map()));
    for (const scope of SCOPE_ORDER) {
      if (!(scope in BUDGETS[name].limits)) continue;
      const id = idOf(holder, scope);
      if (id === null) continue;
      let counters = byScope.get(scope);
      if (!counters) byScope.set(scope, (counters = new Map()));
      const next = (counters.get(id) ?? 0) + amount;
      // Entries at 0 are dropped, so a flood of one-off keys or addresses leaves nothing behind.
      if (next > 0) counters.set(id, next);
      else counters.delete(id);
    }
  }
}

const SERVER = 'server';

/** A holder whose scopes are `scope` alone (the server's included only when it is `server`). */
function onlyIn(holder: BudgetHolder, scope: BudgetScope): BudgetHolder {
  return { keyId: scope === 'key' ? holder.keyId : null, workspaceId: scope === 'workspace' ? holder.workspaceId : null,
    address: scope === 'address' ? holder.address : null, socket: scope === 'socket' ? holder.socket : null, serverWide: scope === 'server' };
}

function idOf(holder: BudgetHolder, scope: BudgetScope): unknown {
  switch (scope) {
    case 'server': return holder.serverWide === false ? null : SERVER;
    case 'key': return holder.keyId ?? null;
    case 'workspace': return holder.workspaceId ?? null;
    case 'address': return holder.address ?? null;
    case 'socket': return holder.socket ?? null;
    default: return null;
  }
}

class Lease implements BudgetLease {
  private released = false;

  constructor(private readonly budget: TenantBudget, private readonly name: BudgetName, private readonly holder: BudgetHolder, public amount: number) {}

  grow(more: number): AppError | null {
    if (this.released || more <= 0) return null;
    const refusal = this.budget.check(this.name, this.holder, more, this.amount);
    if (refusal) return refusal;
    this.budget.add(this.name, this.holder, more);
    this.amount += more;
    return null;
  }

  shrink(less: number): void {
    const amount = Math.min(less, this.amount);
    if (this.released || amount <= 0) return;
    this.budget.add(this.name, this.holder, -amount);
    this.amount -= amount;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.add(this.name, this.holder, -this.amount);
  }
}
