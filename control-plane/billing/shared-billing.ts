import type { DataSource, EntityManager } from 'typeorm';
import { retryTransaction } from '../database/retry-transaction';
import { AppError } from '../errors/app-error';
import { CLUSTER_CHANNEL, clusterMessage } from '../events/cluster-notifier';
import { moneyOf, unitsOf } from './credit-units';
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

/** One guest request to settle in a batch: its usage, who pays, at which prices. */
export interface SettlementItem extends SharedUsage {
  guestWorkspaceId: string;
  prices: TokenPrices;
}

/** A workspace's credit as a lease decision sees it, read after its row was locked (expired holds already gone). */
export interface LeaseState {
  balance: Money;
  /** Unexpired holds of every other lease and request. */
  others: Money;
  /** This lease's amount now (0 when it has none, or it expired). */
  mine: Money;
}

/** A workspace's available credit: the balance minus every unexpired hold (leases included), and how long that stays true without another transaction (until its first hold expires; null: no hold). */
export interface Availability {
  available: Money;
  validForMs: number | null;
}

export type LeaseOutcome =
  | { postpaid: true }
  /** `available`: after this lease's new amount. */
  | ({ postpaid: false; state: LeaseState; lease: Money } & Availability);

/** Upper bound of a token count: keeps a cost inside `numeric(20,10)` (and `integer` columns). */
export const MAX_TOKENS = 1_000_000_000;
const MAX_PRICE_PER_MILLION: Money = '1000000';
const MAX_TTL_MS = 86_400_000;

/**
 * A batch of settlements in one statement: each request's debit, then the owner's credit for
 * the debits actually inserted (a request settled before inserts nothing and is credited
 * nothing again), then each workspace's balance moved once by the net of its new rows (a guest
 * on its own deployment nets zero; NULL + x keeps a postpaid balance NULL). A cost is
 * `(prompt × input + completion × output) × 0.000001` (multiplied: exact in `numeric`, where a
 * division picks its own scale), rounded once to the ledger's 10 places, as credit-units.ts
 * computes it in memory. Returns the new debits (`debit`, id, amount) and balances (`balance`, id, balance).
 */
const SETTLE_MANY = `
  WITH input AS (
    SELECT DISTINCT ON (shared_request_id) * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[], $7::int[], $8::numeric[], $9::numeric[])
      AS t(shared_request_id, guest_id, owner_id, deployment_id, model_id, prompt_tokens, completion_tokens, input_price, output_price)
  ),
  debits AS (
    INSERT INTO billing_ledger (workspace_id, kind, model_id, prompt_tokens, completion_tokens, shared_request_id, amount)
    SELECT guest_id, 'guest_debit', model_id, prompt_tokens, completion_tokens, shared_request_id,
      -round((prompt_tokens::numeric * input_price + completion_tokens::numeric * output_price) * 0.000001, 10)
    FROM input
    ON CONFLICT (kind, shared_request_id) DO NOTHING
    RETURNING shared_request_id, workspace_id, amount
  ),
  credits AS (
    INSERT INTO billing_ledger (workspace_id, kind, deployment_id, model_id, prompt_tokens, completion_tokens, shared_request_id, amount)
    SELECT i.owner_id, 'owner_credit', i.deployment_id, i.model_id, i.prompt_tokens, i.completion_tokens, i.shared_request_id, -d.amount
    FROM debits d JOIN input i USING (shared_request_id)
    RETURNING workspace_id, amount
  ),
  moves AS (
    SELECT workspace_id, sum(amount) AS total FROM (SELECT workspace_id, amount FROM debits UNION ALL SELECT workspace_id, amount FROM credits) m
    GROUP BY workspace_id
  ),
  moved AS (
    UPDATE workspaces w SET credit_balance = w.credit_balance + moves.total FROM moves WHERE w.id = moves.workspace_id
    RETURNING w.id, w.credit_balance
  )
  SELECT 'debit' AS what, shared_request_id AS id, amount::text AS amount FROM debits
  UNION ALL SELECT 'balance', id, credit_balance::text FROM moved`;

/**
 * The database side of per-token billing of guest (shared) requests against workspace credit,
 * as guest-credit.ts uses it: a server's lease of a guest's credit (`leaseCredit`, one hold row
 * sized for many requests, which the server admits requests against in memory) and the
 * settlement of finished requests in batches (`settleMany`: the guest debited, the owner
 * credited what each request did cost, idempotent per shared request). Every movement is a
 * ledger row; every balance change is in the same transaction as its row. All arithmetic is
 * PostgreSQL `numeric`.
 *
 * Costs are exact when prices have at most 4 decimal places (the catalog's do): tokens × price
 * / 1e6 then has at most 10. Finer prices are rounded once, half away from zero, to 10 places.
 */
export class SharedBilling {
  /** `creditChanged`: called when a settlement moves a prepaid balance across zero, so cached "credit exhausted" states are dropped. */
  constructor(private readonly dataSource: DataSource, private readonly creditChanged: () => void = () => {}) {}

  /**
   * Settles many guest requests in one transaction: for each, the `guest_debit` and
   * `owner_credit` rows, and every balance moved once by the sum of its new rows. Each request
   * is settled at most once, ever: rows go in with `ON CONFLICT DO NOTHING` on (kind, shared
   * request id) and balances move only by the rows this statement inserted, so a batch retried
   * after an unknown outcome (the connection broke during COMMIT) changes nothing the first
   * attempt already did. The workspaces are locked first, in id order (as metering, top-ups and
   * leases lock them), with `lockAlso` too. `within` runs last in the transaction, with what
   * each guest was charged by this call (guest-credit.ts shrinks its leases by exactly that
   * there). Returns each request's cost (the one first settled, for a repeat) and what `within`
   * returned.
   */
  async settleMany<T = undefined>(
    items: readonly SettlementItem[],
    options: { lockAlso?: readonly string[]; within?: (manager: EntityManager, charged: ReadonlyMap<string, Money>) => Promise<T> } = {},
  ): Promise<{ costs: Money[]; result: T | undefined }> {
    const rows = items.map(checkSettlement);
    const { costs, crossed, result } = await retryTransaction(this.dataSource, async (manager) => {
      const before = await lockBalances(manager, [...rows.flatMap((row) => [row.guest, row.owner]), ...(options.lockAlso ?? [])]);
      const written: Array<{ what: 'debit' | 'balance'; id: string; amount: string | null }> = rows.length === 0 ? [] : await manager.query(SETTLE_MANY, [
        rows.map((row) => row.id), rows.map((row) => row.guest), rows.map((row) => row.owner), rows.map((row) => row.deployment),
        rows.map((row) => row.model), rows.map((row) => row.prompt), rows.map((row) => row.completion), rows.map((row) => row.input), rows.map((row) => row.output),
      ]);
      const costs = new Map<string, Money>();
      const after = new Map(before);
      for (const row of written) {
        if (row.what === 'debit') costs.set(row.id, canonicalMoney(row.amount!).replace(/^-/, ''));
        else after.set(row.id, row.amount);
      }
      // What each guest was charged now: the debits this statement inserted (a request listed twice counts once).
      const charged = new Map<string, bigint>();
      const counted = new Set<string>();
      for (const row of rows) {
        const cost = costs.get(row.id);
        if (cost === undefined || counted.has(row.id)) continue;
        counted.add(row.id);
        charged.set(row.guest, (charged.get(row.guest) ?? 0n) + unitsOf(cost));
      }
      const repeats = rows.filter((row) => !costs.has(row.id)).map((row) => row.id);
      if (repeats.length > 0) {
        const settled: Array<{ id: string; cost: string }> = await manager.query(
          `SELECT shared_request_id AS id, (-amount)::text AS cost FROM billing_ledger WHERE kind = 'guest_debit' AND shared_request_id = ANY($1)`, [repeats]);
        for (const row of settled) costs.set(row.id, canonicalMoney(row.cost));
      }
      const result = options.within ? await options.within(manager, new Map([...charged].map(([guest, units]) => [guest, moneyOf(units)]))) : undefined;
      const crossed = [...before].some(([id, balance]) => balance !== null && isPositive(balance) !== isPositive(after.get(id) ?? balance));
      return { costs: rows.map((row) => costs.get(row.id)!), crossed, result };
    });
    if (crossed) this.creditChanged();
    return { costs, result };
  }

  /**
   * Sets a credit lease: one hold row (`leaseId`) that a server admits many guest requests
   * against in memory. In one transaction: the workspace's row is locked (so every lease and
   * hold taken meanwhile is seen), its expired holds are deleted, and `decide` gets the balance,
   * the other holds and this lease's amount, and returns the lease's new amount (or null to leave
   * it). `decide` must not exceed `balance − others` (the lease would overdraw), and may run
   * more than once (a retried transaction): it must only compute. The new available credit
   * (balance minus every hold) is announced to every server (`guest-credit`) when the lease
   * changed (`<workspace>|<available>|<origin>|<valid ms>`). A postpaid workspace has no lease.
   */
  async leaseCredit(workspaceId: string, leaseId: string, ttlMs: number, decide: (state: LeaseState) => Money | null, origin = ''): Promise<LeaseOutcome> {
    checkTtl(ttlMs);
    return await retryTransaction(this.dataSource, async (manager): Promise<LeaseOutcome> => {
      const [locked] = await manager.query('SELECT credit_balance::text AS balance FROM workspaces WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE', [workspaceId]);
      if (!locked) throw new AppError('not_found', `no workspace '${workspaceId}'`, { param: 'guestWorkspaceId' });
      if (locked.balance === null) return { postpaid: true };
      await manager.query('DELETE FROM credit_reservations WHERE workspace_id = $1 AND expires_at <= clock_timestamp()', [workspaceId]);
      const [held] = await manager.query(`
        SELECT coalesce(sum(amount) FILTER (WHERE id <> $2), 0)::text AS others, coalesce(max(amount) FILTER (WHERE id = $2), 0)::text AS mine,
          (extract(epoch FROM min(expires_at) FILTER (WHERE id <> $2) - clock_timestamp()) * 1000)::float8 AS others_valid_ms
        FROM credit_reservations WHERE workspace_id = $1`, [workspaceId, leaseId]);
      const state: LeaseState = { balance: canonicalMoney(locked.balance), others: canonicalMoney(held.others), mine: canonicalMoney(held.mine) };
      const decided = decide(state);
      const lease = decided === null ? state.mine : moneyOf(unitsOf(decided));
      // Growing a lease past what the others leave would overdraw; keeping (or shrinking) one never does.
      if (unitsOf(lease) < 0n || (unitsOf(lease) > unitsOf(state.mine) && unitsOf(lease) > unitsOf(state.balance) - unitsOf(state.others))) {
        throw new Error(`a lease of ${lease} would overdraw workspace ${workspaceId} (balance ${state.balance}, other holds ${state.others})`);
      }
      const available = moneyOf(unitsOf(state.balance) - unitsOf(state.others) - unitsOf(lease));
      // Until the first of the other holds expires (this lease is renewed by its own server).
      const validForMs = held.others_valid_ms === null ? null : Math.max(0, Math.floor(held.others_valid_ms));
      if (lease !== state.mine) {
        await writeLeases(manager, [{ id: leaseId, workspaceId, amount: lease }], ttlMs);
        await manager.query('SELECT pg_notify($1, $2)', [CLUSTER_CHANNEL, clusterMessage('guest-credit', `${workspaceId}|${available}|${origin}|${validForMs ?? ''}`)]);
      }
      return { postpaid: false, state, lease, available, validForMs };
    });
  }
}

/**
 * Inside a transaction that holds the workspaces' locks: the amounts of these leases now (a
 * lease that expired and was cleared by another server is absent).
 */
export async function leaseAmounts(manager: EntityManager, leaseIds: readonly string[]): Promise<Map<string, Money>> {
  if (leaseIds.length === 0) return new Map();
  const rows: Array<{ id: string; amount: string }> = await manager.query(
    'SELECT id, amount::text AS amount FROM credit_reservations WHERE id = ANY($1) AND expires_at > clock_timestamp()', [leaseIds]);
  return new Map(rows.map((row) => [row.id, canonicalMoney(row.amount)]));
}

/** Writes leases (amount 0 deletes one) and renews their expiry to `ttlMs` from now. */
export async function writeLeases(manager: EntityManager, leases: ReadonlyArray<{ id: string; workspaceId: string; amount: Money }>, ttlMs: number): Promise<void> {
  const kept = leases.filter((lease) => unitsOf(lease.amount) > 0n);
  const dropped = leases.filter((lease) => unitsOf(lease.amount) <= 0n).map((lease) => lease.id);
  if (dropped.length > 0) await manager.query('DELETE FROM credit_reservations WHERE id = ANY($1)', [dropped]);
  if (kept.length === 0) return;
  await manager.query(`
    INSERT INTO credit_reservations (id, workspace_id, amount, expires_at)
    SELECT id, workspace_id, amount, clock_timestamp() + $4 * interval '1 millisecond' FROM unnest($1::text[], $2::text[], $3::numeric[]) AS t(id, workspace_id, amount)
    ON CONFLICT (id) DO UPDATE SET amount = excluded.amount, expires_at = excluded.expires_at`,
  [kept.map((lease) => lease.id), kept.map((lease) => lease.workspaceId), kept.map((lease) => lease.amount), ttlMs]);
}

/**
 * Inside a transaction that holds the workspaces' locks: each prepaid workspace's available
 * credit (balance minus every unexpired hold) and how long that holds (until its first hold
 * expires), announced to every server on `guest-credit` (`<workspace>|<available>|<origin>|<valid
 * ms>`) when the transaction commits (pg_notify is delivered on commit, in commit order).
 */
export async function announceAvailable(manager: EntityManager, workspaceIds: readonly string[], origin = ''): Promise<Map<string, Availability>> {
  if (workspaceIds.length === 0) return new Map();
  const rows: Array<{ id: string; available: string; valid_ms: number | null }> = await manager.query(`
    SELECT id, available, valid_ms,
      pg_notify($2::text, $3::text || id || '|' || available || '|' || $4::text || '|' || coalesce(floor(valid_ms)::bigint::text, '')) AS notified
    FROM (
      SELECT w.id, (w.credit_balance - coalesce(h.held, 0))::text AS available, greatest(h.valid_ms, 0) AS valid_ms
      FROM workspaces w
      LEFT JOIN (
        SELECT workspace_id, sum(amount) AS held, (extract(epoch FROM min(expires_at) - clock_timestamp()) * 1000)::float8 AS valid_ms
        FROM credit_reservations WHERE workspace_id = ANY($1) AND expires_at > clock_timestamp() GROUP BY workspace_id
      ) h ON h.workspace_id = w.id
      WHERE w.id = ANY($1) AND w.credit_balance IS NOT NULL
    ) credit`, [[...new Set(workspaceIds)], CLUSTER_CHANNEL, clusterMessage('guest-credit', ''), origin]);
  return new Map(rows.map((row) => [row.id, { available: canonicalMoney(row.available), validForMs: row.valid_ms === null ? null : Math.floor(row.valid_ms) }]));
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

/** A settlement's fields, checked (400 naming the field), with canonical prices. */
export function checkSettlement(item: SettlementItem) {
  const prompt = checkTokens(item.promptTokens, 'promptTokens');
  const completion = checkTokens(item.completionTokens, 'completionTokens');
  const [input, output] = checkPrices(item.prices);
  for (const field of ['sharedRequestId', 'ownerWorkspaceId', 'deploymentId', 'modelId', 'guestWorkspaceId'] as const) {
    if (typeof item[field] !== 'string' || item[field] === '') throw new AppError('invalid_request', `${field} must be a non-empty string`, { param: field });
  }
  return {
    id: item.sharedRequestId, guest: item.guestWorkspaceId, owner: item.ownerWorkspaceId, deployment: item.deploymentId, model: item.modelId,
    prompt, completion, input, output,
  };
}

function checkTtl(ttlMs: number): void {
  if (!Number.isSafeInteger(ttlMs) || ttlMs < 1 || ttlMs > MAX_TTL_MS) {
    throw new AppError('invalid_request', `ttlMs must be an integer from 1 to ${MAX_TTL_MS}`, { param: 'ttlMs' });
  }
}

export function checkTokens(value: number, param: string): number {
  if (!Number.isSafeInteger(value) || value < 0 || value > MAX_TOKENS) {
    throw new AppError('invalid_request', `${param} must be an integer from 0 to ${MAX_TOKENS}, got ${value}`, { param });
  }
  return value;
}

export function checkPrices(prices: TokenPrices): [Money, Money] {
  return [
    parseDecimal(prices?.inputPerMillion, 'inputPerMillion', { min: 'non-negative', max: MAX_PRICE_PER_MILLION }),
    parseDecimal(prices?.outputPerMillion, 'outputPerMillion', { min: 'non-negative', max: MAX_PRICE_PER_MILLION }),
  ];
}
