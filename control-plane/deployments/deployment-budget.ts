import type { EntityManager } from 'typeorm';
import type { StoredQuotas } from '../budgets/stored-quota';
import { isPositive, type Money } from '../billing/money';
import { AppError } from '../errors/app-error';

/** Whether a workspace may use this host's local capacity at all (replicas/replica-quota.ts answers it). */
export interface LocalCapacityGrant {
  granted(workspaceId: string): boolean;
}
import type { ProviderKind } from './deployment.entity';

/**
 * What a workspace may create, decided before a deployment exists: how many deployments it
 * keeps (`deployments` budget, counted with the insert, in one transaction), whether it may use
 * this host's local capacity at all (ReplicaQuota, so an ungranted workspace is told at once
 * instead of waiting for a replica that never comes), and whether it can pay: a prepaid
 * workspace at zero credit creates no deployment that bills GPU time.
 */
export class DeploymentBudget {
  constructor(
    private readonly quotas: StoredQuotas,
    private readonly replicas: LocalCapacityGrant,
    /** Providers whose replicas cost the workspace nothing: external agents, and local capacity at LOCAL_PRICE_PER_HOUR 0. */
    private readonly freeProviders: readonly ProviderKind[],
  ) {}

  /** Throws 403 (local capacity not granted) or 402 (no credit for a provider that bills). */
  async checkProvider(manager: EntityManager, workspaceId: string, provider: ProviderKind): Promise<void> {
    if (provider === 'local' && !this.replicas.granted(workspaceId)) {
      throw new AppError('permission_denied', 'this workspace may not use the server\'s local capacity (agent processes on its own host): '
        + 'the operator grants it with setWorkspaceBudget(budget: "local_replicas", scope: "workspace"); or choose another provider', { param: 'provider' });
    }
    if (this.freeProviders.includes(provider)) return;
    const [row] = await manager.query('SELECT credit_balance FROM workspaces WHERE id = $1', [workspaceId]);
    const balance = row?.credit_balance as Money | null | undefined;
    if (balance != null && !isPositive(balance)) {
      throw new AppError('insufficient_quota', `the workspace has no credit left, and replicas on the ${provider} provider bill GPU time; add credit first`);
    }
  }

  /** Inside the insert's transaction: throws when the workspace already has its most deployments. */
  async holdDeployment(manager: EntityManager, workspaceId: string): Promise<void> {
    await this.quotas.hold(manager, 'deployments', workspaceId, async (locked) => {
      const [row] = await locked.query(`SELECT count(*)::int AS count FROM deployments WHERE workspace_id = $1 AND status <> 'Deleted'`, [workspaceId]);
      return Number(row.count);
    });
  }
}
