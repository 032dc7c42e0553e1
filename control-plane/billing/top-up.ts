import type { EntityManager } from 'typeorm';
import { AppError } from '../errors/app-error';
import { canonicalMoney, type Money } from './money';

/**
 * Adds prepaid credit inside the caller's transaction: the `top_up` row and the balance move
 * together. A postpaid workspace becomes prepaid here; its first top-up is preceded by an
 * `opening_balance` row that offsets the rows of its postpaid history (those were billed
 * outside any credit), so from then on its balance equals the sum of its rows.
 * Returns the new balance.
 */
export async function topUp(manager: EntityManager, workspaceId: string, amount: Money): Promise<Money> {
  // The row lock orders this against metering and settlement of the same workspace, which
  // lock it too; reading the sum of rows after it sees every row they committed.
  const [workspace] = await manager.query('SELECT credit_balance FROM workspaces WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE', [workspaceId]);
  if (!workspace) throw new AppError('not_found', `no workspace '${workspaceId}'`, { param: 'workspaceId' });
  if (workspace.credit_balance === null) {
    await manager.query(`
      INSERT INTO billing_ledger (workspace_id, kind, amount)
      SELECT $1, 'opening_balance', -sum(amount) FROM billing_ledger WHERE workspace_id = $1 HAVING sum(amount) <> 0`, [workspaceId]);
  }
  await manager.query(`INSERT INTO billing_ledger (workspace_id, kind, amount) VALUES ($1, 'top_up', $2)`, [workspaceId, amount]);
  try {
    const [rows] = await manager.query(
      'UPDATE workspaces SET credit_balance = coalesce(credit_balance, 0) + $2 WHERE id = $1 RETURNING credit_balance', [workspaceId, amount]);
    return canonicalMoney(rows[0].credit_balance);
  } catch (error) {
    if ((error as { driverError?: { code?: string } }).driverError?.code === '22003') {
      throw new AppError('invalid_request', 'the balance would exceed what a workspace can hold (below 10000000000)', { param: 'amount', cause: error });
    }
    throw error;
  }
}
