import { QueryFailedError } from 'typeorm';
import type { Catalog, CatalogModel } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import { AppError } from '../errors/app-error';
import { quoteValue, shortened } from '../errors/quote-value';
import { newId } from '../ids';
import { Adapter, AdapterAttachment, AdapterRevision } from './adapter.entities';
import { checkAdapterName } from './adapter-rules';
import type { AdapterStore } from './adapter-store';
import type { AdapterWeights, CheckedWeights, WeightsInput } from './adapter-weights';

export interface CreateAdapterInput extends WeightsInput {
  name: string;
  baseModel: string;
}

/**
 * The adapters of a workspace (docs/adapters.md): registered from checked weights, given new
 * revisions, attached to deployments of their base model, shared, deleted. Every refusal is a
 * 400 naming the input field (or NOT_FOUND), decided before anything changes: a deployment
 * keeps serving whatever was refused.
 */
export class AdapterService {
  constructor(
    private readonly store: AdapterStore,
    private readonly weights: Pick<AdapterWeights, 'read' | 'keep' | 'discard'>,
    private readonly catalog: Pick<Catalog, 'find'>,
    private readonly deployments: { get(workspaceId: string, id: string): Promise<Deployment> },
    private readonly options: { maxPerWorkspace: number },
  ) {}

  async list(workspaceId: string, deploymentId?: string | null): Promise<Adapter[]> {
    if (deploymentId) {
      await this.deployment(workspaceId, deploymentId);
      return await this.store.adapters.createQueryBuilder('adapter')
        .innerJoin(AdapterAttachment, 'attachment', 'attachment.adapter_id = adapter.id AND attachment.deployment_id = :deploymentId', { deploymentId })
        .where('adapter.workspace_id = :workspaceId', { workspaceId }).orderBy('adapter.created_at', 'ASC').getMany();
    }
    return await this.store.adapters.find({ where: { workspaceId }, order: { createdAt: 'ASC' } });
  }

  /** The workspace's adapter, or NOT_FOUND: another workspace's is unknown here, as a made-up id. */
  async get(workspaceId: string, id: string): Promise<Adapter> {
    const adapter = await this.store.find(workspaceId, id);
    if (!adapter) throw new AppError('not_found', `no adapter ${quoteValue(shortened(id))}`, { param: 'id' });
    return adapter;
  }

  /** Ids of the deployments it is attached to; call with a `get` adapter (the id is not checked against a workspace). */
  async deploymentIdsOf(adapterId: string): Promise<string[]> {
    return await this.store.deploymentIdsOf(adapterId);
  }

  async create(workspaceId: string, input: CreateAdapterInput): Promise<Adapter> {
    const name = checkAdapterName(input.name);
    const base = this.baseModel(input.baseModel);
    if (await this.store.adapters.findOne({ where: { workspaceId, name }, select: { id: true } })) {
      throw new AppError('invalid_request', `an adapter named '${name}' already exists in this workspace`, { param: 'name' });
    }
    if (await this.store.adapters.count({ where: { workspaceId } }) >= this.options.maxPerWorkspace) {
      throw new AppError('invalid_request', `this workspace has ${this.options.maxPerWorkspace} adapters, the most it may register (ADAPTER_MAX_PER_WORKSPACE); delete one first`, { param: 'name' });
    }
    const weights = await this.weights.read(workspaceId, base, input);
    const id = newId('ad');
    const objectKey = await this.weights.keep(workspaceId, id, 1, weights);
    try {
      const adapter = await this.store.transaction(async (manager) => {
        const row = manager.create(Adapter, {
          id, workspaceId, name, baseModel: base.id, rank: weights.rank, format: weights.format, sourceKind: weights.sourceKind, sourceRef: weights.sourceRef,
          sha256: weights.sha256, sizeBytes: weights.sizeBytes, revision: 1, sharedWithGuests: false,
        });
        await manager.insert(Adapter, row);
        await manager.insert(AdapterRevision, revisionRow(id, 1, weights, objectKey));
        return await manager.findOneByOrFail(Adapter, { id });
      });
      await this.store.changed(adapter, false, []);
      return adapter;
    } catch (error) {
      await this.weights.discard([objectKey]);
      // Two registrations of one name at once: the unique index decides, and the loser is told as the check above tells.
      if (error instanceof QueryFailedError && (error as QueryFailedError & { code?: string }).code === '23505') {
        throw new AppError('invalid_request', `an adapter named '${name}' already exists in this workspace`, { param: 'name', cause: error });
      }
      throw error;
    }
  }

  /**
   * New weights: a new revision, checked as at registration (same base; the rank must still
   * fit every deployment it is attached to). Requests already given the old revision finish on
   * it (its weights stay in `adapter_revisions`); new requests get the new one.
   */
  async updateWeights(workspaceId: string, id: string, input: WeightsInput): Promise<Adapter> {
    const adapter = await this.get(workspaceId, id);
    const weights = await this.weights.read(workspaceId, this.baseModel(adapter.baseModel, 'id'), input);
    for (const deploymentId of await this.store.deploymentIdsOf(adapter.id)) {
      const deployment = await this.deployments.get(workspaceId, deploymentId).catch(() => null);
      if (deployment && weights.rank > deployment.maxLoraRank) {
        throw new AppError('invalid_request', `the new weights have rank ${weights.rank}, above the maxLoraRank ${deployment.maxLoraRank} of attached deployment '${deployment.id}'`, { param: 'rank' });
      }
    }
    const revision = adapter.revision + 1;
    const objectKey = await this.weights.keep(workspaceId, adapter.id, revision, weights);
    try {
      const updated = await this.store.transaction(async (manager) => {
        // Only from the revision read: two replacements at once make two revisions, never one lost.
        const result = await manager.createQueryBuilder().update(Adapter).set({
          revision, rank: weights.rank, format: weights.format, sourceKind: weights.sourceKind, sourceRef: weights.sourceRef, sha256: weights.sha256, sizeBytes: weights.sizeBytes,
        }).where('id = :id AND revision = :current', { id: adapter.id, current: adapter.revision }).execute();
        if (!result.affected) throw new AppError('invalid_request', 'the adapter\'s weights were replaced meanwhile; read it again and retry', { param: 'id' });
        await manager.insert(AdapterRevision, revisionRow(adapter.id, revision, weights, objectKey));
        return await manager.findOneByOrFail(Adapter, { id: adapter.id });
      });
      await this.store.changed(updated);
      return updated;
    } catch (error) {
      await this.weights.discard([objectKey]);
      throw error;
    }
  }

  /** Attaches to a deployment of the workspace serving its base model, with room for its rank. Attaching twice is a no-op. */
  async attach(workspaceId: string, adapterId: string, deploymentId: string): Promise<Adapter> {
    const adapter = await this.get(workspaceId, adapterId).catch((error: unknown) => rethrowAs(error, 'adapterId'));
    const deployment = await this.deployment(workspaceId, deploymentId);
    if (deployment.modelId !== adapter.baseModel) {
      throw new AppError('invalid_request', `adapter '${adapter.name}' is for '${adapter.baseModel}'; deployment '${deployment.id}' serves '${deployment.modelId}'`, { param: 'deploymentId' });
    }
    if (deployment.maxLoras === 0) {
      throw new AppError('invalid_request', `deployment '${deployment.id}' serves no adapters (maxLoras 0); set maxLoras with updateDeployment first`, { param: 'deploymentId' });
    }
    if (adapter.rank > deployment.maxLoraRank) {
      throw new AppError('invalid_request', `adapter '${adapter.name}' has rank ${adapter.rank}, above deployment '${deployment.id}''s maxLoraRank ${deployment.maxLoraRank}`, { param: 'deploymentId' });
    }
    await this.store.attachments.createQueryBuilder().insert().into(AdapterAttachment).values({ adapterId: adapter.id, deploymentId: deployment.id })
      .orIgnore().execute();
    await this.store.changed(adapter);
    return adapter;
  }

  /** New requests for it on that deployment are 404 at once; requests already running finish. */
  async detach(workspaceId: string, adapterId: string, deploymentId: string): Promise<Adapter> {
    const adapter = await this.get(workspaceId, adapterId).catch((error: unknown) => rethrowAs(error, 'adapterId'));
    const result = await this.store.attachments.delete({ adapterId: adapter.id, deploymentId });
    if (!result.affected) throw new AppError('invalid_request', `adapter '${adapter.name}' is not attached to deployment ${quoteValue(shortened(deploymentId))}`, { param: 'deploymentId' });
    await this.store.changed(adapter);
    return adapter;
  }

  /** Gone at once for new requests; requests running finish (their links stay valid until their deadline); its weights go. */
  async delete(workspaceId: string, id: string): Promise<Adapter> {
    const adapter = await this.get(workspaceId, id);
    const revisions = await this.store.revisions.find({ where: { adapterId: adapter.id } });
    await this.store.adapters.delete({ id: adapter.id, workspaceId });
    await this.store.changed(adapter, true, []);
    // Objects of revisions a running request may be fetching: its link was signed already; a
    // fetch that starts after this fails as adapter_load_failed (502), which a deletion means.
    await this.weights.discard(revisions.map((revision) => revision.objectKey));
    return adapter;
  }

  async setSharing(workspaceId: string, id: string, shared: boolean): Promise<Adapter> {
    const adapter = await this.get(workspaceId, id);
    if (adapter.sharedWithGuests === shared) return adapter;
    await this.store.adapters.update({ id: adapter.id, workspaceId }, { sharedWithGuests: shared });
    const updated = await this.get(workspaceId, id);
    await this.store.changed(updated);
    return updated;
  }

  private baseModel(id: string, param = 'baseModel'): CatalogModel {
    const model = this.catalog.find(id);
    if (!model) throw new AppError('invalid_request', `baseModel ${quoteValue(shortened(id))} is not a catalog model id`, { param });
    if (model.modality !== 'text' || model.task === 'embedding') {
      throw new AppError('invalid_request', `baseModel '${model.id}' is ${model.task === 'embedding' ? 'an embedding' : `an ${model.modality}`} model; adapters are for chat and completion models`, { param });
    }
    return model;
  }

  private async deployment(workspaceId: string, deploymentId: string): Promise<Deployment> {
    try {
      return await this.deployments.get(workspaceId, deploymentId);
    } catch (error) {
      // Another workspace's deployment is unknown here (never "belongs to another workspace").
      if (error instanceof AppError) throw new AppError('not_found', `no deployment ${quoteValue(shortened(deploymentId))}`, { param: 'deploymentId', cause: error });
      throw error;
    }
  }
}

function revisionRow(adapterId: string, revision: number, weights: CheckedWeights, objectKey: string | null): Partial<AdapterRevision> {
  return {
    adapterId, revision, format: weights.format, rank: weights.rank, sourceKind: weights.sourceKind, sourceRef: weights.sourceRef,
    objectKey, sha256: weights.sha256, sizeBytes: weights.sizeBytes,
  };
}

/** A NOT_FOUND of an argument other than `id`: names that argument. */
function rethrowAs(error: unknown, param: string): never {
  if (error instanceof AppError && error.code === 'not_found') throw new AppError('not_found', error.message, { param, cause: error });
  throw error;
}
