import { ConfigError } from '../config/env-fields';
import { BUDGET_NAMES, BUDGETS, type BudgetName, type BudgetScope } from './budget-kinds';

/** Each budget's default limit per scope, as the environment sets them. */
export type BudgetLimits = Readonly<Record<BudgetName, Readonly<Partial<Record<BudgetScope, number>>>>>;

/**
 * The defaults of every budget (budget-kinds.ts), each overridable by its environment variable:
 * a whole number of at least 0 (0 refuses every hold; for `local_replicas` per workspace it means
 * "only where the operator allows"). One readable error names every bad variable.
 */
export function loadBudgetLimits(env: NodeJS.ProcessEnv = process.env): BudgetLimits {
  const problems: string[] = [];
  const limits = {} as Record<BudgetName, Partial<Record<BudgetScope, number>>>;
  for (const name of BUDGET_NAMES) {
    const scopes: Partial<Record<BudgetScope, number>> = {};
    for (const [scope, limit] of Object.entries(BUDGETS[name].limits) as [BudgetScope, { env: string; default: number }][]) {
      const raw = env[limit.env];
      if (raw === undefined || raw === '') {
        scopes[scope] = limit.default;
        continue;
      }
      const value = Number(raw);
      if (!Number.isSafeInteger(value) || value < 0) problems.push(`${limit.env}: must be a whole number of at least 0, got '${raw.slice(0, 40)}'`);
      else scopes[scope] = value;
    }
    limits[name] = Object.freeze(scopes);
  }
  if (problems.length > 0) throw new ConfigError(`invalid budget configuration: ${problems.join('; ')}`);
  return Object.freeze(limits);
}

/** `base` with some scopes of some budgets replaced (tests and callers that override a few). */
export function withLimits(base: BudgetLimits, changes: Partial<Record<BudgetName, Partial<Record<BudgetScope, number>>>>): BudgetLimits {
  const merged = { ...base } as Record<BudgetName, Partial<Record<BudgetScope, number>>>;
  for (const [name, scopes] of Object.entries(changes) as [BudgetName, Partial<Record<BudgetScope, number>>][]) {
    merged[name] = Object.freeze({ ...base[name], ...scopes });
  }
  return Object.freeze(merged);
}
