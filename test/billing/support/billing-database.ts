import { randomBytes } from 'node:crypto';
import type { DataSource } from 'typeorm';
import { BillingQueries } from '../../../control-plane/billing/billing-queries';
import { openDatabase } from '../../../control-plane/data-source';
import { WorkspaceService } from '../../../control-plane/workspaces/workspace.service';
import { createTestDatabase, dropTestDatabase } from '../../support/test-database';

/** A fresh migrated database and the billing pieces that need nothing else (no server, no agents). */
export interface BillingDatabase {
  dataSource: DataSource;
  billing: BillingQueries;
  /** A workspace: postpaid without `credit`, else prepaid through a top-up. */
  workspace(credit?: string): Promise<string>;
  /** A Running replica of a new deployment of `workspaceId`, metered from `secondsAgo` ago at `pricePerHour`. */
  runningReplica(workspaceId: string, pricePerHour: string, secondsAgo: number): Promise<{ deploymentId: string; replicaId: string }>;
  /** Per workspace: its balance, the sum of its ledger rows, and whether they are equal as numeric. */
  reconcile(): Promise<Array<{ id: string; balance: string | null; rows: string; equal: boolean | null }>>;
  close(): Promise<void>;
}

export async function openBillingDatabase(): Promise<BillingDatabase> {
  const url = await createTestDatabase();
  const dataSource = await openDatabase(url);
  const workspaces = new WorkspaceService(dataSource);
  const billing = new BillingQueries(dataSource);
  return {
    dataSource,
    billing,
    async workspace(credit) {
      const { id } = await workspaces.create(`billing ${randomBytes(3).toString('hex')}`);
      // Prepaid with nothing: a balance of 0 and no rows (a top-up must be above 0).
      if (credit === '0') await dataSource.query('UPDATE workspaces SET credit_balance = 0 WHERE id = $1', [id]);
      else if (credit !== undefined) await billing.addCredit(id, credit);
      return id;
    },
    async runningReplica(workspaceId, pricePerHour, secondsAgo) {
      const deploymentId = `dep_${randomBytes(6).toString('hex')}`;
      const replicaId = `rep_${randomBytes(6).toString('hex')}`;
      await dataSource.query(`
        INSERT INTO deployments (id, workspace_id, model_id, slug, status, price_cap_per_hour, min_replicas, max_replicas, desired_replicas, autoscale, provider)
        VALUES ($1, $2, 'test/model', $1, 'Running', 100, 1, 1, 1, false, 'market')`, [deploymentId, workspaceId]);
      await dataSource.query(`
        INSERT INTO replicas (id, deployment_id, status, provider, join_token_hash, price_per_hour, started_at, metered_until)
        VALUES ($1, $2, 'Running', 'market', $1, $3, clock_timestamp() - $4 * interval '1 second', clock_timestamp() - $4 * interval '1 second')`,
      [replicaId, deploymentId, pricePerHour, secondsAgo]);
      return { deploymentId, replicaId };
    },
    async reconcile() {
      return await dataSource.query(`
        SELECT w.id, w.credit_balance AS balance, coalesce(sum(l.amount), 0)::text AS rows,
          CASE WHEN w.credit_balance IS NULL THEN NULL ELSE w.credit_balance = coalesce(sum(l.amount), 0) END AS equal
        FROM workspaces w LEFT JOIN billing_ledger l ON l.workspace_id = w.id GROUP BY w.id ORDER BY w.id`);
    },
    async close() {
      await dataSource.destroy();
      await dropTestDatabase(url);
    },
  };
}
