import { AppError } from '../errors/app-error';
import { BUDGETS, type BudgetName, type BudgetScope } from './budget-kinds';

const HOLDERS: Record<BudgetScope, string> = {
  key: 'this API key', workspace: 'this workspace', server: 'this server', address: 'your address', socket: 'this connection',
};

/**
 * The refusal of a budget, naming it: 429 `budget_exceeded` when the caller's own share is used
 * up (its key, workspace, address or connection), 503 `server_busy` when the server's is, both
 * with Retry-After; 403 `permission_denied` when the caller's limit is 0 (the operator has not
 * granted it, e.g. local capacity). `retryAfterSeconds`: held budgets free up when something ends (1 s); stored
 * ones when the caller deletes something, so a client's automatic retries should not hammer them.
 */
export function budgetRefusal(name: BudgetName, scope: BudgetScope, used: number, limit: number, retryAfterSeconds = 1): AppError {
  const budget = BUDGETS[name];
  const amount = (value: number) => (budget.unit === 'bytes' ? bytes(value) : String(value));
  const holder = HOLDERS[scope];
  const message = limit === 0
    ? `budget '${name}' (${budget.counts}) allows none for ${holder}` + (name === 'local_replicas' && scope === 'workspace'
      ? ': the operator grants a workspace this host\'s local capacity (setWorkspaceBudget)' : '')
    : `budget '${name}' is used up for ${holder}: ${amount(used)} of at most ${amount(limit)} ${budget.counts} ${budget.kind === 'held' ? 'now' : 'in all'}; `
      + (budget.kind === 'held' ? 'retry when one ends' : 'delete some first, or ask the operator for more');
  // A limit of 0 is a decision, not a moment: waiting changes nothing.
  if (limit === 0 && scope !== 'server') return new AppError('permission_denied', message);
  return new AppError(scope === 'server' ? 'server_busy' : 'budget_exceeded', message, { retryAfterSeconds });
}

export function bytes(value: number): string {
  const MIB = 1024 * 1024;
  if (value >= 1024 * MIB) return `${(value / (1024 * MIB)).toFixed(1)} GiB`;
  if (value >= MIB) return `${(value / MIB).toFixed(1)} MiB`;
  return value >= 1024 ? `${(value / 1024).toFixed(1)} KiB` : `${value} bytes`;
}
