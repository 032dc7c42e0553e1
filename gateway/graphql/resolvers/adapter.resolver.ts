import { Arg, Ctx, FieldResolver, ID, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { Adapter, AdapterChange, AdminPort } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import {
  AdapterDeploymentType, AdapterResidencyType, AdapterType, AdapterUsageType, AdapterWeightsInput, CreateAdapterInput,
} from '../types/adapter.type';
import { AdapterUploadLinkInput, AdapterUploadLinkType } from '../types/adapter-upload-link.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

const SOURCE_PREFIX = { FILE: 'file', BUCKET: 'bucket', HUGGING_FACE: 'hf' } as const;

/** LoRA adapters of the caller's workspace (docs/adapters.md): every record is looked up in it, so another's is NOT_FOUND. */
@Resolver(() => AdapterType)
export class AdapterResolver {
  constructor(private readonly admin: Pick<AdminPort, 'adapters' | 'adapterResidency' | 'adapterUsage' | 'deploymentStore' | 'fileUploads'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [AdapterType], { description: 'The workspace\'s adapters, or those attached to deploymentId' })
  async adapters(@Arg('deploymentId', () => ID, { nullable: true }) deploymentId: string | null, @Ctx() context: GraphQLContext): Promise<AdapterType[]> {
    return (await this.admin.adapters.list(workspaceOf(context), deploymentId)).map((adapter) => toType(adapter));
  }

  @Query(() => AdapterType)
  async adapter(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.get(workspaceOf(context), id));
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => [AdapterDeploymentType], { description: 'The deployments it is attached to' })
  async deployments(@Root() adapter: AdapterType): Promise<AdapterDeploymentType[]> {
    const ids = adapter.deploymentIds ?? await this.admin.adapters.deploymentIdsOf(adapter.id);
    const rows = await Promise.all(ids.map((id) => this.admin.deploymentStore.find(id)));
    return rows.filter((row) => row !== null && row.status !== 'Deleted').map((row) => ({ id: row!.id, name: row!.slug }));
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => [AdapterResidencyType], { description: 'Replicas holding or loading it: live from their agents\' latest heartbeats on this server, and from the other servers\' registry rows (state only, about a second old)' })
  async residency(@Root() adapter: AdapterType): Promise<AdapterResidencyType[]> {
    const ids = adapter.deploymentIds ?? await this.admin.adapters.deploymentIdsOf(adapter.id);
    return this.admin.adapterResidency.of(adapter.id, ids);
  }

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @FieldResolver(() => AdapterUsageType, { description: 'Its requests and tokens between from and to' })
  async usage(@Root() adapter: AdapterType, @Arg('from') from: Date, @Arg('to') to: Date, @Ctx() context: GraphQLContext): Promise<AdapterUsageType> {
    return await this.admin.adapterUsage.of(workspaceOf(context), adapter.id, from, to);
  }

  @Mutation(() => AdapterType, { description: 'Registers an adapter from a Files API upload (purpose user_data), a deployment\'s bucket or a Hugging Face repo; its weights are checked against baseModel' })
  async createAdapter(@Arg('input') input: CreateAdapterInput, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.create(workspaceOf(context), input), []);
  }

  @Mutation(() => AdapterUploadLinkType, { description: 'A signed one-time link to upload adapter weights to the Files API (purpose user_data) by PUT, for a browser that speaks only GraphQL' })
  async createAdapterUploadLink(@Arg('input') input: AdapterUploadLinkInput, @Ctx() context: GraphQLContext): Promise<AdapterUploadLinkType> {
    const link = await this.admin.fileUploads.createLink(workspaceOf(context), input);
    return Object.assign(new AdapterUploadLinkType(), { url: link.url, path: link.path, fileId: link.fileId, expiresAt: link.expiresAt, bytes: link.bytes });
  }

  @Mutation(() => AdapterType, { description: 'New weights: a new revision; requests in flight finish on the old one' })
  async updateAdapterWeights(@Arg('id', () => ID) id: string, @Arg('input') input: AdapterWeightsInput, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.updateWeights(workspaceOf(context), id, input));
  }

  @Mutation(() => AdapterType, { description: 'Attaches it to a deployment of its base model (rank within its maxLoraRank, maxLoras above 0)' })
  async attachAdapter(@Arg('adapterId', () => ID) adapterId: string, @Arg('deploymentId', () => ID) deploymentId: string, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.attach(workspaceOf(context), adapterId, deploymentId));
  }

  @Mutation(() => AdapterType, { description: 'New requests for it on that deployment are refused at once; running ones finish' })
  async detachAdapter(@Arg('adapterId', () => ID) adapterId: string, @Arg('deploymentId', () => ID) deploymentId: string, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.detach(workspaceOf(context), adapterId, deploymentId));
  }

  @Mutation(() => AdapterType, { description: 'Deletes it and its weights; its name is free again' })
  async deleteAdapter(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.delete(workspaceOf(context), id), [], true);
  }

  @Mutation(() => AdapterType, { description: 'Offers it to guests of shared serving (shared/<adapter id> on /shared/v1), or stops' })
  async setAdapterSharing(@Arg('id', () => ID) id: string, @Arg('shared') shared: boolean, @Ctx() context: GraphQLContext): Promise<AdapterType> {
    return toType(await this.admin.adapters.setSharing(workspaceOf(context), id, shared));
  }

  @Subscription(() => AdapterType, {
    description: 'Fires when an adapter of the workspace is created, changed, attached, detached, shared or deleted (deleted: true)',
    subscribe: servedBySubscriptionHub,
  })
  adapterUpdated(@Root() change: AdapterChange): AdapterType {
    return toType(change.adapter, change.deploymentIds, change.deleted);
  }
}

/** `deploymentIds`: known already (an event carries them), so its field resolvers read no attachment again. */
function toType(adapter: Adapter, deploymentIds?: readonly string[], deleted = false): AdapterType {
  return Object.assign(new AdapterType(), {
    id: adapter.id, name: adapter.name, baseModel: adapter.baseModel, rank: adapter.rank, format: adapter.format,
    source: `${SOURCE_PREFIX[adapter.sourceKind]}:${adapter.sourceRef}`, revision: adapter.revision, sha256: adapter.sha256, sizeBytes: adapter.sizeBytes,
    sharedWithGuests: adapter.sharedWithGuests, deleted, createdAt: adapter.createdAt, updatedAt: adapter.updatedAt,
    ...(deploymentIds ? { deploymentIds } : {}),
  });
}
