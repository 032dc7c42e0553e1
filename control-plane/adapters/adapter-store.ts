import type { DataSource, EntityManager, Repository } from 'typeorm';
import { RefreshingCache } from '../cache/refreshing-cache';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { Adapter, AdapterAttachment, AdapterRevision } from './adapter.entities';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /** An adapter changed (created, new weights, attached, detached, shared) or was deleted, here or on another server. */
    adapterUpdated: [AdapterChange];
  }
}

/** What `adapterUpdated` carries: the adapter as it is now (or as it was, when deleted) and its deployments. */
export interface AdapterChange {
  readonly workspaceId: string;
  readonly adapter: Adapter;
  readonly deploymentIds: readonly string[];
  readonly deleted: boolean;
}

/** One adapter as the request path reads it: the row, its current revision's weights, the deployments it is attached to. */
export interface AdapterEntry {
  readonly adapter: Adapter;
  readonly weights: AdapterRevision;
  readonly deploymentIds: ReadonlySet<string>;
}

/** A workspace's adapters by name: what `model` is looked up in, per request, without a query. */
export type WorkspaceAdapters = ReadonlyMap<string, AdapterEntry>;

/**
 * Adapter rows plus the per-workspace cache the request path reads (RefreshingCache, as the
 * deployments' slugs): every change clears the workspace's entry and tells subscribers, on
 * this server at once and on the others through the cluster notifier (topic `adapter`).
 */
export class AdapterStore {
  readonly adapters: Repository<Adapter>;
  readonly revisions: Repository<AdapterRevision>;
  readonly attachments: Repository<AdapterAttachment>;
  private readonly byWorkspace: RefreshingCache<string, WorkspaceAdapters>;

  constructor(
    private readonly dataSource: DataSource,
    private readonly events: ControlPlaneEvents,
    private readonly notifier: Pick<ClusterNotifier, 'publish' | 'on' | 'onReset'>,
    cacheTtlMs = 2_000,
  ) {
    this.adapters = dataSource.getRepository(Adapter);
    this.revisions = dataSource.getRepository(AdapterRevision);
    this.attachments = dataSource.getRepository(AdapterAttachment);
    this.byWorkspace = new RefreshingCache((workspaceId) => this.load(workspaceId), { ttlMs: cacheTtlMs, maxEntries: 10_000 });
    notifier.on('adapter', (payload) => void this.changedElsewhere(payload));
    notifier.onReset(() => this.byWorkspace.clear());
  }

  /** Hot path: the workspace's adapters by name, cached. */
  async ofWorkspace(workspaceId: string): Promise<WorkspaceAdapters> {
    return await this.byWorkspace.get(workspaceId);
  }

  async find(workspaceId: string, id: string): Promise<Adapter | null> {
    return await this.adapters.findOne({ where: { id, workspaceId } });
  }

  async deploymentIdsOf(adapterId: string): Promise<string[]> {
    return (await this.attachments.find({ where: { adapterId }, order: { id: 'ASC' } })).map((row) => row.deploymentId);
  }

  async transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return await this.dataSource.transaction(work);
  }

  /** The adapter changed (or, `deleted`, is gone): forget the workspace's cache and tell subscribers everywhere. */
  async changed(adapter: Adapter, deleted = false, deploymentIds?: readonly string[]): Promise<void> {
    this.byWorkspace.delete(adapter.workspaceId);
    this.events.emit('adapterUpdated', { workspaceId: adapter.workspaceId, adapter, deleted, deploymentIds: deploymentIds ?? await this.deploymentIdsOf(adapter.id) });
    // A deletion's row is gone: the others hear the whole change, not an id they could no longer read.
    this.notifier.publish('adapter', deleted ? `${adapter.workspaceId}|${adapter.id}|${JSON.stringify(adapter)}` : `${adapter.workspaceId}|${adapter.id}`);
  }

  private async changedElsewhere(payload: string): Promise<void> {
    const [workspaceId, adapterId, ...rest] = payload.split('|');
    if (!workspaceId || !adapterId) return;
    this.byWorkspace.delete(workspaceId);
    if (rest.length > 0) {
      const row = JSON.parse(rest.join('|')) as Adapter;
      const adapter = Object.assign(new Adapter(), row, { createdAt: new Date(row.createdAt), updatedAt: new Date(row.updatedAt) });
      this.events.emit('adapterUpdated', { workspaceId, adapter, deleted: true, deploymentIds: [] });
      return;
    }
    const adapter = await this.find(workspaceId, adapterId).catch(() => null);
    if (!adapter) return;
    this.events.emit('adapterUpdated', { workspaceId, adapter, deleted: false, deploymentIds: await this.deploymentIdsOf(adapter.id).catch(() => []) });
  }

  /** Every adapter whose owner offers it to guests of shared serving, with its weights and deployments (the shared index reloads it). */
  async sharedWithGuests(): Promise<AdapterEntry[]> {
    return await this.entries('a.shared_with_guests', []);
  }

  private async load(workspaceId: string): Promise<WorkspaceAdapters> {
    const byName = new Map<string, AdapterEntry>();
    for (const entry of await this.entries('a.workspace_id = $1', [workspaceId])) byName.set(entry.adapter.name, entry);
    return byName;
  }

  /** The adapters matching `where` (on `adapters a`), each with its current revision and the deployments it is attached to. */
  private async entries(where: string, parameters: unknown[]): Promise<AdapterEntry[]> {
    const rows: Array<{ id: string; deployment_ids: string[] | null }> = await this.dataSource.query(`
      SELECT a.id, array_remove(array_agg(t.deployment_id ORDER BY t.id), NULL) AS deployment_ids
      FROM adapters a LEFT JOIN adapter_attachments t ON t.adapter_id = a.id
      WHERE ${where} GROUP BY a.id`, parameters);
    if (rows.length === 0) return [];
    const adapters = await this.adapters.find({ where: rows.map((row) => ({ id: row.id })), order: { createdAt: 'ASC', id: 'ASC' } });
    const revisions = await this.revisions.find({ where: adapters.map((adapter) => ({ adapterId: adapter.id, revision: adapter.revision })) });
    const weights = new Map(revisions.map((revision) => [revision.adapterId, revision]));
    const deployments = new Map(rows.map((row) => [row.id, new Set(row.deployment_ids ?? [])]));
    const entries: AdapterEntry[] = [];
    for (const adapter of adapters) {
      const revision = weights.get(adapter.id);
      if (revision) entries.push({ adapter, weights: revision, deploymentIds: deployments.get(adapter.id)! });
    }
    return entries;
  }
}
