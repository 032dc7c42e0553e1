import type { DataSource } from 'typeorm';
import type { ApiKey } from '../api-keys/api-key.entity';
import type { ApiKeyService } from '../api-keys/api-key.service';
import { canonicalMoney, isPositive, MAX_TOP_UP, parseDecimal, type Money } from '../billing/money';
import { topUp } from '../billing/top-up';
import { retryTransaction } from '../database/retry-transaction';
import type { DeploymentService } from '../deployments/deployment.service';
import { AppError } from '../errors/app-error';
import { newId } from '../ids';
import { workspaceName } from './workspace.service';

/** A workspace as the operator sees it. */
export interface WorkspaceSummary {
  id: string;
  name: string;
  /** null: postpaid. */
  creditBalance: Money | null;
  createdAt: Date;
  deletedAt: Date | null;
}

const COLUMNS = 'id, name, credit_balance, created_at, deleted_at';

/** What a deleted workspace's data becomes (batches/batch-deletion.ts): its batches cancelled, its files deleted. */
export interface WorkspaceBatches {
  workspaceDeleted(workspaceId: string): Promise<void>;
}

/**
 * The operator's view of workspaces: open one with its first key (and prepaid credit, through
 * the ledger), list them with their balances, and delete one. A guest is simply any
 * workspace's key calling the shared endpoint.
 */
export class WorkspaceAdmin {
  constructor(
    private readonly dataSource: DataSource,
    private readonly apiKeys: Pick<ApiKeyService, 'create' | 'revokeAll'>,
    private readonly deployments: Pick<DeploymentService, 'list' | 'delete'>,
    private readonly batches: WorkspaceBatches,
  ) {}

  /**
   * A workspace and its first API key (plaintext returned this once), in one transaction.
   * With `creditBalance` (0 included) it is prepaid and the credit is a `top_up` ledger row;
   * without, postpaid.
   */
  async create(name: unknown, creditBalance?: unknown): Promise<{ workspace: WorkspaceSummary; apiKey: ApiKey; plaintext: string }> {
    const validName = workspaceName(name);
    const credit = creditBalance == null ? null : parseDecimal(creditBalance, 'creditBalance', { min: 'non-negative', max: MAX_TOP_UP });
    return await retryTransaction(this.dataSource, async (manager) => {
      const id = newId('ws');
      await manager.query('INSERT INTO workspaces (id, name, credit_balance) VALUES ($1, $2, $3)', [id, validName, credit === null ? null : '0']);
      if (credit !== null && isPositive(credit)) await topUp(manager, id, credit);
      const { apiKey, plaintext } = await this.apiKeys.create(id, 'first key', {}, manager);
      const [row] = await manager.query(`SELECT ${COLUMNS} FROM workspaces WHERE id = $1`, [id]);
      return { workspace: toSummary(row), apiKey, plaintext };
    });
  }

  /** Oldest first; deleted workspaces only when asked. */
  async list(options: { includeDeleted?: boolean } = {}): Promise<WorkspaceSummary[]> {
    const rows = await this.dataSource.query(
      `SELECT ${COLUMNS} FROM workspaces WHERE $1 OR deleted_at IS NULL ORDER BY created_at, id`, [options.includeDeleted === true]);
    return rows.map(toSummary);
  }

  /**
   * Revokes every key (their calls answer 401 at once), marks the workspace deleted, drops its
   * credit holds, deletes its deployments through DeploymentService, so replicas end and
   * metering bills their last stretch (and their batches are cancelled, their files deleted),
   * then cancels and deletes what is left of its batches and files (those of deployments
   * deleted before included). The row, its balance and its ledger stay for audit.
   * Deleting again finishes what a failed attempt left (a deployment that would not stop).
   */
  async delete(id: string): Promise<WorkspaceSummary> {
    const [existing] = await this.dataSource.query('SELECT id FROM workspaces WHERE id = $1', [id]);
    if (!existing) throw new AppError('not_found', `no workspace '${id}'`, { param: 'id' });
    await this.apiKeys.revokeAll(id);
    await this.dataSource.query('UPDATE workspaces SET deleted_at = coalesce(deleted_at, clock_timestamp()) WHERE id = $1', [id]);
    await this.dataSource.query('DELETE FROM credit_reservations WHERE workspace_id = $1', [id]);
    const failures: unknown[] = [];
    for (const deployment of await this.deployments.list(id)) {
      await this.deployments.delete(id, deployment.id).catch((error: unknown) => failures.push(error));
    }
    // After the deployments: their batches, cancelled once each is Deleted, end without files.
    await this.batches.workspaceDeleted(id);
    if (failures.length > 0) {
      throw new AppError('invalid_state_transition', `${failures.length} deployment(s) of workspace '${id}' could not be deleted yet; delete the workspace again`, { cause: failures[0] });
    }
    const [row] = await this.dataSource.query(`SELECT ${COLUMNS} FROM workspaces WHERE id = $1`, [id]);
    return toSummary(row);
  }
}

function toSummary(row: { id: string; name: string; credit_balance: string | null; created_at: Date; deleted_at: Date | null }): WorkspaceSummary {
  return {
    id: row.id, name: row.name, creditBalance: row.credit_balance === null ? null : canonicalMoney(row.credit_balance),
    createdAt: row.created_at, deletedAt: row.deleted_at,
  };
}
