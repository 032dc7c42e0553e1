import { loadBudgetLimits, withLimits } from '../../control-plane/budgets/budget-config';
import type { BudgetName, BudgetScope } from '../../control-plane/budgets/budget-kinds';
import { TenantBudget, type BudgetLease } from '../../control-plane/budgets/tenant-budget';
import { AppError } from '../../control-plane/errors/app-error';

function budgetWith(changes: Partial<Record<BudgetName, Partial<Record<BudgetScope, number>>>>, overrides: Record<string, number> = {}): TenantBudget {
  const limits = withLimits(loadBudgetLimits({}), changes);
  return new TenantBudget({
    limitFor: (name, scope, workspaceId) => overrides[`${workspaceId}:${name}:${scope}`] ?? limits[name][scope] ?? Infinity,
  });
}

function lease(value: BudgetLease | AppError): BudgetLease {
  if (value instanceof AppError) throw value;
  return value;
}

describe('TenantBudget', () => {
  const alice = { keyId: 'k1', workspaceId: 'w1' };
  const alicesOtherKey = { keyId: 'k2', workspaceId: 'w1' };
  const bob = { keyId: 'k3', workspaceId: 'w2' };

  test('holds per key, per workspace and per server, refusing the narrowest full scope with its name', () => {
    const budget = budgetWith({ requests: { key: 2, workspace: 3, server: 4 } });
    lease(budget.take('requests', alice));
    lease(budget.take('requests', alice));
    const perKey = budget.take('requests', alice);
    expect(perKey).toBeInstanceOf(AppError);
    expect((perKey as AppError).code).toBe('budget_exceeded');
    expect((perKey as AppError).message).toContain("budget 'requests'");
    expect((perKey as AppError).message).toContain('this API key');
    expect((perKey as AppError).retryAfterSeconds).toBe(1);

    lease(budget.take('requests', alicesOtherKey));
    const perWorkspace = budget.take('requests', alicesOtherKey) as AppError;
    expect(perWorkspace.code).toBe('budget_exceeded');
    expect(perWorkspace.message).toContain('this workspace');

    lease(budget.take('requests', bob));
    const perServer = budget.take('requests', bob) as AppError;
    expect(perServer.code).toBe('server_busy');
    expect(perServer.message).toContain('this server');
    expect(budget.used('requests', 'server')).toBe(4);
  });

  test('a refused hold holds nothing, and a release gives back exactly once', () => {
    const budget = budgetWith({ requests: { key: 1, workspace: 10, server: 10 } });
    const first = lease(budget.take('requests', alice));
    expect(budget.take('requests', alice)).toBeInstanceOf(AppError);
    expect(budget.used('requests', 'workspace', alice)).toBe(1);
    first.release();
    first.release();
    expect(budget.used('requests', 'workspace', alice)).toBe(0);
    expect(budget.used('requests', 'server')).toBe(0);
    lease(budget.take('requests', alice));
  });

  test('bytes grow under the same limits; a lone holder may pass a byte budget, a second may not', () => {
    const budget = budgetWith({ memory: { key: 100, workspace: 1_000, server: 1_000 } });
    const upload = lease(budget.take('memory', alice, 60));
    expect(upload.grow(30)).toBeNull();
    // Alone in its key's budget: it may grow past it (one upload larger than the budget works, one at a time).
    expect(upload.grow(50)).toBeNull();
    expect(upload.amount).toBe(140);
    const second = budget.take('memory', alice, 1) as AppError;
    expect(second.code).toBe('budget_exceeded');
    upload.release();
    expect(budget.used('memory', 'key', alice)).toBe(0);
  });

  test('an operator limit for one workspace replaces the default there only; 0 is a refusal that says so', () => {
    const budget = budgetWith({ sockets: { key: 5 } }, { 'w1:sockets:key': 0 });
    const refused = budget.take('sockets', alice) as AppError;
    expect(refused.code).toBe('permission_denied');
    expect(refused.message).toContain('allows none');
    lease(budget.take('sockets', bob));
  });

  test('scopes the holder does not know are skipped: an address before a key, a socket', () => {
    const budget = budgetWith({ connections: { address: 2, server: 3 }, subscriptions: { socket: 1, key: 5, server: 5 } });
    lease(budget.take('connections', { address: '10.0.0.1' }));
    lease(budget.take('connections', { address: '10.0.0.1' }));
    expect((budget.take('connections', { address: '10.0.0.1' }) as AppError).message).toContain('your address');
    lease(budget.take('connections', { address: '10.0.0.2' }));
    expect((budget.take('connections', { address: '10.0.0.3' }) as AppError).code).toBe('server_busy');

    const socket = {};
    lease(budget.take('subscriptions', { ...alice, socket }));
    expect((budget.take('subscriptions', { ...alice, socket }) as AppError).message).toContain('this connection');
    lease(budget.take('subscriptions', { ...alice, socket: {} }));
  });

  test('entries at zero are dropped, so a flood of one-off addresses leaves nothing behind', () => {
    const budget = budgetWith({});
    for (let index = 0; index < 1_000; index++) lease(budget.take('connections', { address: `a${index}` })).release();
    const counters = (budget as unknown as { counters: Map<string, Map<string, Map<unknown, number>>> }).counters;
    expect(counters.get('connections')!.get('address')!.size).toBe(0);
  });
});

describe('loadBudgetLimits', () => {
  test('reads each variable and names every bad one', () => {
    expect(loadBudgetLimits({ REQUESTS_IN_FLIGHT_PER_KEY: '7' }).requests.key).toBe(7);
    expect(loadBudgetLimits({}).local_replicas.workspace).toBe(0);
    expect(() => loadBudgetLimits({ REQUESTS_IN_FLIGHT_PER_KEY: '-1', MEMORY_BUDGET_BYTES: 'lots' }))
      .toThrow(/REQUESTS_IN_FLIGHT_PER_KEY.*MEMORY_BUDGET_BYTES/);
  });
});
