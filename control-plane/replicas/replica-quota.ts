import type { EntityManager } from 'typeorm';
import type { StoredQuotas } from '../budgets/stored-quota';
import type { Deployment } from '../deployments/deployment.entity';

/**
 * Local capacity is the operator's: a replica on the `local` provider is an agent process on
 * the server's own host, $0 by default and, before this, unlimited (a zero-credit workspace
 * started 8 of them, and each deployment could ask for 64). A new local replica needs its
 * workspace's `local_replicas` budget (0 unless the operator grants it; the first-run `dev`
 * workspace has it) and room in this host's (`LOCAL_REPLICAS`), both counted from the replica
 * rows inside the transaction that inserts it.
 */
export class ReplicaQuota {
  constructor(private readonly quotas: StoredQuotas, private readonly serverId: string) {}

  /** Throws the budget's refusal when `deployment` may not get one more replica on `provider` now. */
  async hold(manager: EntityManager, deployment: Pick<Deployment, 'workspaceId'>, provider: string): Promise<void> {
    if (provider !== 'local') return;
    await this.quotas.hold(manager, 'local_replicas', deployment.workspaceId, async (locked) => count(locked, `
      SELECT count(*)::int AS count FROM replicas r JOIN deployments d ON d.id = r.deployment_id
      WHERE r.provider = 'local' AND r.status <> 'Terminated' AND d.workspace_id = $1`, [deployment.workspaceId]));
    // The host's budget: this server's agents (each server on a host spawns its own).
    await locked(manager, `budget:local_replicas:host:${this.serverId}`);
    const onHost = await count(manager, `SELECT count(*)::int AS count FROM replicas WHERE provider = 'local' AND status <> 'Terminated' AND server_id = $1`, [this.serverId]);
    const refusal = this.quotas.refusal('local_replicas', 'server', null, onHost);
    if (refusal) throw refusal;
  }

  /** Whether the workspace may use local capacity at all (checked when a deployment is created, so it is refused at once). */
  granted(workspaceId: string): boolean {
    return this.quotas.refusal('local_replicas', 'workspace', workspaceId, 0) === null;
  }
}

async function count(manager: EntityManager, sql: string, parameters: unknown[]): Promise<number> {
  const [row] = await manager.query(sql, parameters);
  return Number(row.count);
}

async function locked(manager: EntityManager, name: string): Promise<void> {
  await manager.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [name]);
}
