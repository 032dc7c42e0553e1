import type { AdapterRef } from '../../proto/worker/v1';
import type { Deployment } from '../deployments/deployment.entity';
import type { AdapterAddressing, AddressedAdapter } from '../pipeline/adapter-addressing';
import type { ObjectStore } from '../storage/object-store';
import type { AdapterEntry, AdapterStore } from './adapter-store';

/** An adapter as `GET /v1/models` lists it. */
export interface ListedAdapter {
  readonly name: string;
  readonly baseModel: string;
  readonly createdAt: Date;
}

/**
 * The request path's view of adapters (docs/adapters.md#addressing): which adapter a `model`
 * names, on a deployment's endpoint or the workspace's single base URL, and the AdapterRef a
 * job carries. Reads the store's per-workspace cache only; the one per-request cost is signing
 * the weights' link (an HMAC, no round trip).
 */
export class AdapterDirectory implements AdapterAddressing {
  constructor(
    private readonly store: Pick<AdapterStore, 'ofWorkspace'>,
    private readonly managed: Pick<ObjectStore, 'presignGet'>,
    private readonly options: { minLinkTtlSeconds: number },
    private readonly now: () => number = Date.now,
  ) {}

  async onDeployment(workspaceId: string, deployment: Pick<Deployment, 'id'>, model: string, deadlineUnixMs: number): Promise<AddressedAdapter | null> {
    const entry = (await this.store.ofWorkspace(workspaceId)).get(model);
    if (!entry || !entry.deploymentIds.has(deployment.id)) return null;
    return await this.addressed(entry, deadlineUnixMs);
  }

  async namesOn(workspaceId: string, deploymentId: string): Promise<ReadonlySet<string>> {
    const names = new Set<string>();
    for (const entry of (await this.store.ofWorkspace(workspaceId)).values()) {
      if (entry.deploymentIds.has(deploymentId)) names.add(entry.adapter.name);
    }
    return names;
  }

  /**
   * The single base URL: the deployment an adapter name reaches among the workspace's
   * (`deployments`, oldest first): a running one it is attached to, else any it is attached to
   * (which then answers as that deployment does: paused, still creating). Null: no adapter of
   * the workspace by that name, or attached nowhere.
   */
  async deploymentFor(workspaceId: string, model: string, deployments: readonly Deployment[]): Promise<Deployment | null> {
    const entry = (await this.store.ofWorkspace(workspaceId)).get(model);
    if (!entry || entry.deploymentIds.size === 0) return null;
    const attached = deployments.filter((deployment) => entry.deploymentIds.has(deployment.id));
    return attached.find((deployment) => deployment.status === 'Running') ?? attached[0] ?? null;
  }

  /** Whether `model` is an adapter name of the workspace (attached or not): for refusals that name it as such. */
  async isAdapter(workspaceId: string, model: string): Promise<boolean> {
    return (await this.store.ofWorkspace(workspaceId)).has(model);
  }

  /** The adapters attached to any of `deploymentIds`, for `GET /v1/models`. */
  async listed(workspaceId: string, deploymentIds: readonly string[]): Promise<ListedAdapter[]> {
    const listed: ListedAdapter[] = [];
    for (const entry of (await this.store.ofWorkspace(workspaceId)).values()) {
      if (deploymentIds.some((id) => entry.deploymentIds.has(id))) {
        listed.push({ name: entry.adapter.name, baseModel: entry.adapter.baseModel, createdAt: entry.adapter.createdAt });
      }
    }
    return listed.sort((a, b) => a.createdAt.getTime() - b.createdAt.getTime() || a.name.localeCompare(b.name));
  }

  private async addressed(entry: AdapterEntry, deadlineUnixMs: number): Promise<AddressedAdapter> {
    const { adapter, weights } = entry;
    const ref = await signedRef(entry, adapter.name, deadlineUnixMs, this.managed, this.options.minLinkTtlSeconds, this.now);
    return { ref, adapter: { id: adapter.id, name: adapter.name, revision: weights.revision } };
  }
}

/**
 * The AdapterRef a job carries for `entry`'s current revision, answered as `displayName`: its
 * weights' link valid until the job's deadline (an agent fetches on its first use), never
 * shorter than `minLinkTtlSeconds`.
 */
export async function signedRef(
  entry: AdapterEntry, displayName: string, deadlineUnixMs: number, managed: Pick<ObjectStore, 'presignGet'>, minLinkTtlSeconds: number, now: () => number,
): Promise<AdapterRef> {
  const { adapter, weights } = entry;
  const ttlSeconds = Math.max(minLinkTtlSeconds, Math.ceil((deadlineUnixMs - now()) / 1000));
  const source = weights.objectKey ? await managed.presignGet(weights.objectKey, ttlSeconds) : weights.sourceRef;
  return {
    name: `${adapter.id}.r${weights.revision}`, displayName, format: `ADAPTER_FORMAT_${weights.format}`, source,
    sha256: weights.sha256 ?? '', sizeBytes: weights.sizeBytes ?? 0, rank: weights.rank, scale: 0,
  };
}
