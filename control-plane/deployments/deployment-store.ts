import type { DataSource, EntityManager, Repository } from 'typeorm';
import { Not } from 'typeorm';
import type { QueryDeepPartialEntity } from 'typeorm/query-builder/QueryPartialEntity';
import { AppError } from '../errors/app-error';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { Deployment, type DeploymentStatus, type SharingState } from './deployment.entity';
import { assertTransition } from './deployment-transitions';
import { RefreshingCache } from '../cache/refreshing-cache';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** A deployment changed (here, or on another server: re-read on its notification). */
    deploymentUpdated: [Deployment];
  }
}

/**
 * Deployment rows plus the slug cache the request path reads. Every status change goes
 * through `transition`, which checks the table, clears the cache and tells subscribers, on
 * this server at once and on the others through the cluster notifier.
 */
export class DeploymentStore {
  private readonly deployments: Repository<Deployment>;
  private readonly bySlug: RefreshingCache<string, Deployment | null>;
  /** The workspace of each deployment not deleted, by id (a subscription checks it: 500 of them were 500 queries). */
  private readonly owners: RefreshingCache<string, string | null>;
  /** Each workspace's deployments not deleted, oldest first: the workspace base URL (`/v1`) picks one by `model` on every request. */
  private readonly byWorkspace: RefreshingCache<string, readonly Deployment[]>;

  constructor(
    dataSource: DataSource,
    private readonly events: ControlPlaneEvents,
    private readonly notifier: Pick<ClusterNotifier, 'publish' | 'on' | 'onReset'>,
    cacheTtlMs = 2_000,
  ) {
    this.deployments = dataSource.getRepository(Deployment);
    this.bySlug = new RefreshingCache(async (slug) => {
      const row = await this.deployments.findOne({ where: { slug } });
      return row && row.status !== 'Deleted' ? row : null;
    }, { ttlMs: cacheTtlMs, maxEntries: 10_000 });
    this.owners = new RefreshingCache(async (id) => {
      const row = await this.deployments.findOne({ where: { id }, select: { id: true, workspaceId: true, status: true } });
      return row && row.status !== 'Deleted' ? row.workspaceId : null;
    }, { ttlMs: cacheTtlMs, maxEntries: 10_000 });
    this.byWorkspace = new RefreshingCache(async (workspaceId) => await this.deployments.find({
      where: { workspaceId, status: Not('Deleted') }, order: { createdAt: 'ASC', id: 'ASC' },
    }), { ttlMs: cacheTtlMs, maxEntries: 10_000 });
    notifier.on('deployment', (id) => void this.changedElsewhere(id));
    notifier.onReset(() => {
      this.bySlug.clear();
      this.owners.clear();
      this.byWorkspace.clear();
    });
  }

  get repository(): Repository<Deployment> {
    return this.deployments;
  }

  async find(id: string): Promise<Deployment | null> {
    return await this.deployments.findOne({ where: { id } });
  }

  /** The workspace of deployment `id`, cached; null when unknown or deleted. */
  async ownerOf(id: string): Promise<string | null> {
    return await this.owners.get(id);
  }

  async listActive(): Promise<Deployment[]> {
    return await this.deployments.find({ where: { status: Not('Deleted') }, order: { createdAt: 'ASC' } });
  }

  /** Hot path: the deployment behind `/d/<slug>/v1`, cached (refreshed in the background); null when unknown or deleted. */
  async findBySlug(slug: string): Promise<Deployment | null> {
    return await this.bySlug.get(slug);
  }

  /** Hot path: the workspace's deployments not deleted (oldest first), cached like the slugs. */
  async listOfWorkspace(workspaceId: string): Promise<readonly Deployment[]> {
    return await this.byWorkspace.get(workspaceId);
  }

  /** Inserts the row; `before` runs first in the same transaction (a budget's count and check). */
  async insert(deployment: Deployment, before?: (manager: EntityManager) => Promise<void>): Promise<Deployment> {
    const saved = before
      ? await this.deployments.manager.transaction(async (manager) => {
        await before(manager);
        return await manager.getRepository(Deployment).save(deployment);
      })
      : await this.deployments.save(deployment);
    this.changed(saved);
    return saved;
  }

  /**
   * Writes only `changes`, and only while the row's status is one of `whileStatus`; returns the
   * row as it is now. Never a save of a whole entity: a copy read before a pause, a delete or
   * a user's edit would write those columns back.
   */
  async update(id: string, changes: QueryDeepPartialEntity<Deployment>, whileStatus: readonly DeploymentStatus[]): Promise<Deployment> {
    const result = await this.deployments.createQueryBuilder().update(Deployment)
      .set(changes)
      .where('id = :id AND status IN (:...whileStatus)', { id, whileStatus }).execute();
    const current = await this.find(id);
    if (!current) throw new AppError('not_found', `no deployment '${id}'`, { param: 'id' });
    if (result.affected) this.changed(current);
    return current;
  }

  /**
   * `deployment.status` → `to`, only if the row still has the status the caller read: when
   * something else changed it first (a pause, a delete, an agent ready), that change stands and
   * the row as it is now comes back; callers acting for a user look at its status.
   */
  async transition(deployment: Deployment, to: DeploymentStatus, reason: string | null = null): Promise<Deployment> {
    if (deployment.status === to && deployment.statusReason === reason) return deployment;
    if (deployment.status !== to) assertTransition(deployment.status, to);
    return await this.update(deployment.id, { status: to, statusReason: reason }, [deployment.status]);
  }

  /**
   * Moves the sharing state (and the owner's choice with it, when given), only while the row
   * is serving or paused and, with `whileSharing`, still in that sharing state: a rollout pass
   * holding an old copy never marks `shared` a deployment whose owner has turned sharing off.
   */
  async setSharing(id: string, sharing: SharingState, whileSharing?: SharingState, shareIdleCapacity?: boolean): Promise<Deployment | null> {
    const query = this.deployments.createQueryBuilder().update(Deployment)
      .set(shareIdleCapacity === undefined ? { sharing } : { sharing, shareIdleCapacity })
      .where('id = :id AND status IN (:...serving)', { id, serving: ['Creating', 'Running', 'Paused'] });
    if (whileSharing) query.andWhere('sharing = :whileSharing', { whileSharing });
    const result = await query.execute();
    const current = await this.find(id);
    if (current && result.affected) this.changed(current);
    return result.affected ? current : null;
  }

  /** Deployments open to guests now (any workspace), for the shared pool. */
  async listShared(): Promise<Deployment[]> {
    return await this.deployments.find({ where: { sharing: 'shared', status: Not('Deleted') } });
  }

  /** One of its replicas changed (load progress, a replica ready): the deployment's subscribers re-read it. */
  async replicasChanged(id: string): Promise<void> {
    const deployment = await this.find(id);
    if (deployment) this.changed(deployment);
  }

  private changed(deployment: Deployment): void {
    this.bySlug.delete(deployment.slug);
    this.owners.delete(deployment.id);
    this.byWorkspace.delete(deployment.workspaceId);
    this.events.emit('deploymentUpdated', deployment);
    this.notifier.publish('deployment', deployment.id);
  }

  /** Another server changed the deployment: forget it here and tell this server's subscribers. */
  private async changedElsewhere(id: string): Promise<void> {
    const deployment = await this.find(id).catch(() => null);
    if (!deployment) return;
    this.bySlug.delete(deployment.slug);
    this.owners.delete(deployment.id);
    this.byWorkspace.delete(deployment.workspaceId);
    this.events.emit('deploymentUpdated', deployment);
  }
}
