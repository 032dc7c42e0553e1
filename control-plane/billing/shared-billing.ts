import type { DataSource, EntityManager } from 'typeorm';
import { retryTransaction } from '../database/retry-transaction';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { canonicalMoney, isPositive, parseDecimal, type Money } from './money';

/** Per-token prices of a shared model, per 1M tokens, as decimal strings. */
export interface TokenPrices {
  inputPerMillion: Money;
  outputPerMillion: Money;
}

/** Credit held for one guest request in flight. */
export interface Reservation {
  id: string;
  workspaceId: string;
  /** What is held (prepaid) or would have been (postpaid). */
  amount: Money;
  /** false: the guest is postpaid; nothing is held and nothing can be refused. */
  prepaid: boolean;
}

export interface SharedUsage {
  /** One guest request; its debit and credit rows share it, and settling it twice changes nothing. */
  sharedRequestId: string;
  ownerWorkspaceId: string;
  /** The owner's deployment that served the request. */
  deploymentId: string;
  modelId: string;
  promptTokens: number;
  completionTokens: number;
}

/** Upper bound of a token count: keeps a cost inside `numeric(20,10)` (and `integer` columns). */
export const MAX_TOKENS = 1_000_000_000;
const MAX_PRICE_PER_MILLION: Money = '1000000';
const MAX_TTL_MS = 86_400_000;
/** `(prompt × input + completion × output) / 1e6`, by multiplication (exact in `numeric`; division picks its own scale), rounded once to the ledger's 10 places. */
const COST = 'round(($1::numeric * $2::numeric + $3::numeric * $4::numeric) * 0.000001, 10)';

/**
 * Per-token billing of guest (shared) requests against workspace credit. `reserve` holds the
 * most a request can cost before it runs, `settle` debits the guest and credits the owner what
 * it did cost (one transaction, idempotent per shared request), `release` drops the hold of a
 * request that failed. Every movement is a ledger row; every balance change is in the same
 * transaction as its row. All arithmetic is PostgreSQL `numeric`.
 *
 * Costs are exact when prices have at most 4 decimal places (the catalog's do): tokens × price
 * / 1e6 then has at most 10. Finer prices are rounded once, half away from zero, to 10 places.
 */
export class SharedBilling {
  /** `creditChanged`: called when a settlement moves a prepaid balance across zero, so cached "credit exhausted" states are dropped. */
  constructor(private readonly dataSource: DataSource, private readonly creditChanged: () => void = () => {}) {}

  /**
   * Holds `maxPromptTokens × input + maxCompletionTokens × output` (per 1M) of the guest's
   * prepaid credit. Returns null when the available credit (balance minus unexpired holds)
   * cannot cover it or is not above zero (the caller answers 402). A postpaid guest gets a
   * reservation with `prepaid: false` and no hold. Holds expire after `ttlMs`, so a crashed
   * server's holds stop counting: choose it above the longest request.
   */
  async reserve(guestWorkspaceId: string, maxPromptTokens: number, maxCompletionTokens: number, prices: TokenPrices, ttlMs: number): Promise<Reservation | null> {
    const tokens = [checkTokens(maxPromptTokens, 'maxPromptTokens'), checkTokens(maxCompletionTokens, 'maxCompletionTokens')];
    const [input, output] = checkPrices(prices);
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TTL_MS) {
      throw new AppError('invalid_request', `ttlMs must be an integer from 1 to ${MAX_TTL_MS}`, { param: 'ttlMs' });
    }
    const cost = [tokens[0], input, tokens[1], output];
    const [guest] = await this.dataSource.query(
      `SELECT credit_balance, ${COST} AS amount FROM workspaces WHERE id = $5 AND deleted_at IS NULL`, [...cost, guestWorkspaceId]);
    if (!guest) throw new AppError('not_found', `no workspace '${guestWorkspaceId}'`, { param: 'guestWorkspaceId' });
    const id = newId('hold');
    if (guest.credit_balance === null) return { id, workspaceId: guestWorkspaceId, amount: canonicalMoney(guest.amount), prepaid: false };

    const amount = await retryTransaction(this.dataSource, async (manager) => {
      // Holds of one workspace are taken one at a time: each sees every hold before it.
      const [locked] = await manager.query('SELECT credit_balance FROM workspaces WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE', [guestWorkspaceId]);
      if (!locked) throw new AppError('not_found', `no workspace '${guestWorkspaceId}'`, { param: 'guestWorkspaceId' });
      if (locked.credit_balance === null) return null;
      await manager.query('DELETE FROM credit_reservations WHERE workspace_id = $1 AND expires_at <= clock_timestamp()', [guestWorkspaceId]);
      const [held] = await manager.query(`
        INSERT INTO credit_reservations (id, workspace_id, amount, expires_at)
        SELECT $6, w.id, hold.amount, clock_timestamp() + $7 * interval '1 millisecond'
        FROM workspaces w, (SELECT ${COST} AS amount) hold
        WHERE w.id = $5 AND w.credit_balance - coalesce((SELECT sum(amount) FROM credit_reservations WHERE workspace_id = $5), 0) >= greatest(hold.amount, 0.0000000001)
        RETURNING amount`, [...cost, guestWorkspaceId, id, ttlMs]);
      return held ? canonicalMoney(held.amount) : false;
    });
    if (amount === false) return null;
    // Became postpaid between the two reads (an operator cannot do that today; stay correct anyway).
    if (amount === null) return { id, workspaceId: guestWorkspaceId, amount: canonicalMoney(guest.amount), prepaid: false };
    return { id, workspaceId: guestWorkspaceId, amount, prepaid: true };
  }

  /**
   * In one transaction: drops the hold, writes the `guest_debit` (−cost) and `owner_credit`
   * (+cost) rows with the same shared request id, and moves both prepaid balances (a postpaid
   * side keeps a null balance; its row is still written). Idempotent per `sharedRequestId`:
   * settling again returns the cost first settled. Returns the cost.
   *
   * The charge is what the request did cost, even past the hold: pass upper bounds to
   * `reserve`, or a prepaid balance can end below zero by the difference.
   */
  async settle(reservation: Reservation, usage: SharedUsage, prices: TokenPrices): Promise<Money> {
    const promptTokens = checkTokens(usage.promptTokens, 'promptTokens');
    const completionTokens = checkTokens(usage.completionTokens, 'completionTokens');
    const [input, output] = checkPrices(prices);
    for (const field of ['sharedRequestId', 'ownerWorkspaceId', 'deploymentId', 'modelId'] as const) {
      if (typeof usage[field] !== 'string' || usage[field] === '') throw new AppError('invalid_request', `${field} must be a non-empty string`, { param: field });
    }
    const guestId = reservation.workspaceId;
    const { cost, crossed } = await retryTransaction(this.dataSource, async (manager) => {
      const before = await lockBalances(manager, [guestId, usage.ownerWorkspaceId]);
      await manager.query('DELETE FROM credit_reservations WHERE id = $1', [reservation.id]);
      const [debit] = await manager.query(`
        INSERT INTO billing_ledger (workspace_id, kind, model_id, prompt_tokens, completion_tokens, shared_request_id, amount)
        VALUES ($5, 'guest_debit', $6, $8, $9, $7, -${COST})
        ON CONFLICT (kind, shared_request_id) DO NOTHING RETURNING amount`,
      [promptTokens, input, completionTokens, output, guestId, usage.modelId, usage.sharedRequestId, promptTokens, completionTokens]);
      if (!debit) {
        const [settled] = await manager.query(`SELECT -amount AS cost FROM billing_ledger WHERE kind = 'guest_debit' AND shared_request_id = $1`, [usage.sharedRequestId]);
        return { cost: canonicalMoney(settled.cost), crossed: false };
      }
      const charged = canonicalMoney(debit.amount).replace(/^-/, '');
      await manager.query(`
        INSERT INTO billing_ledger (workspace_id, kind, deployment_id, model_id, prompt_tokens, completion_tokens, shared_request_id, amount)
        VALUES ($1, 'owner_credit', $2, $3, $4, $5, $6, $7)`,
      [usage.ownerWorkspaceId, usage.deploymentId, usage.modelId, promptTokens, completionTokens, usage.sharedRequestId, charged]);
      // Two statements, not one: a guest settling on its own deployment is one row moved twice.
      await manager.query('UPDATE workspaces SET credit_balance = credit_balance - $2 WHERE id = $1', [guestId, charged]);
      await manager.query('UPDATE workspaces SET credit_balance = credit_balance + $2 WHERE id = $1', [usage.ownerWorkspaceId, charged]);
      const after = await lockBalances(manager, [guestId, usage.ownerWorkspaceId]);
      return { cost: charged, crossed: [...before].some(([id, balance]) => balance !== null && isPositive(balance) !== isPositive(after.get(id)!)) };
    });
    if (crossed) this.creditChanged();
    return cost;
  }

  /** A failed or canceled request: drops the hold and charges nothing. */
  async release(reservation: Reservation): Promise<void> {
    if (!reservation.prepaid) return;
    await this.dataSource.query('DELETE FROM credit_reservations WHERE id = $1', [reservation.id]);
  }
}

/** Locks the workspaces (in id order, as metering and top-ups do) and reads their balances. */
async function lockBalances(manager: EntityManager, workspaceIds: string[]): Promise<Map<string, Money | null>> {
  const rows: Array<{ id: string; credit_balance: string | null }> = await manager.query(
    'SELECT id, credit_balance FROM workspaces WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE', [[...new Set(workspaceIds)]]);
  for (const id of workspaceIds) {
    if (!rows.some((row) => row.id === id)) throw new AppError('not_found', `no workspace '${id}'`, { param: 'workspaceId' });
  }
  return new Map(rows.map((row) => [row.id, row.credit_balance]));
}

function checkTokens(value: number, param: string): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_TOKENS) {
    throw new AppError('invalid_request', `${param} must be an integer from 0 to ${MAX_TOKENS}, got ${value}`, { param });
  }
  return value;
}

function checkPrices(prices: TokenPrices): [Money, Money] {
  return [
    parseDecimal(prices?.inputPerMillion, 'inputPerMillion', { min: 'non-negative', max: MAX_PRICE_PER_MILLION }),
    parseDecimal(prices?.outputPerMillion, 'outputPerMillion', { min: 'non-negative', max: MAX_PRICE_PER_MILLION }),
  ];
}
