import { Arg, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { AdminPort, Replica, ReplicaLoad } from '../../../control-plane/api/admin';
import { AppError, shortened } from '../../../control-plane/api/errors';
import type { Deployment, ProviderKind } from '../../../control-plane/api/inference';
import { sloOf } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { ReplicaLoadType } from '../types/capacity.type';
import { AutoscalingPointType } from '../types/metrics-history.type';
import {
  CreateDeploymentInput, CreateDeploymentPayload, DeploymentType, ReplicaType, ScalingDecisionType, ScalingPolicy, UpdateDeploymentInput,
} from '../types/deployment.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';
import { servedBySubscriptionHub } from '../subscription-routes';

@Resolver(() => DeploymentType)
export class DeploymentResolver {
  /**
   * One read of a deployment's replicas per resolved deployment object, so `replicas` and
   * `progress` in one response describe the same instant (two reads could straddle a heartbeat).
   */
  private readonly replicaReads = new WeakMap<DeploymentType, Promise<Replica[]>>();

  constructor(
    private readonly admin: Pick<AdminPort, 'capacityLoop' | 'deploymentStore' | 'deployments' | 'replicas' | 'metricsHistory' | 'waitingForReplica'>,
    private readonly publicUrl: () => string,
  ) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [DeploymentType], { description: 'Deployments of the workspace (deleted ones excluded)' })
  async deployments(@Ctx() context: GraphQLContext): Promise<DeploymentType[]> {
    return (await this.admin.deployments.list(workspaceOf(context))).map((deployment) => this.toType(deployment));
  }

  @Query(() => DeploymentType)
  async deployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.admin.deployments.get(workspaceOf(context), id));
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => [ReplicaType], { description: 'Every replica, terminated ones included, oldest first' })
  async replicas(@Root() deployment: DeploymentType): Promise<ReplicaType[]> {
    return (await this.replicaRows(deployment)).map(replicaView);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => Int)
  async replicaStartFailures(@Root() deployment: DeploymentType): Promise<number> {
    return (await this.replicaRows(deployment)).filter((replica) => replica.startFailure !== null).length;
  }

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @FieldResolver(() => [ScalingDecisionType], { description: 'The autoscaler\'s recorded decisions, newest first' })
  async scalingDecisions(@Root() deployment: DeploymentType, @Arg('limit', () => Int, { defaultValue: 20 }) limit: number): Promise<ScalingDecisionType[]> {
    const rows = await this.admin.capacityLoop.recordedDecisions(deployment.id, limit);
    return rows.map((row) => ({ ...row, inputs: JSON.stringify(row.inputs), policy: row.policy ?? 'concurrency' }));
  }

  @DatabaseCost(DATABASE_WEIGHTS.aggregate)
  @FieldResolver(() => [AutoscalingPointType], {
    description: 'From `from` to `to` (at most 7 days) in steps of stepMinutes (1 to 1440; at most 1500 points), every step present, oldest first: '
      + 'SLO attainment, arrivals against the autoscaler\'s forecast, replicas, and GPU cost against what fixed-max would have cost',
  })
  async autoscalingHistory(
    @Root() deployment: DeploymentType, @Arg('from') from: Date, @Arg('to') to: Date,
    @Arg('stepMinutes', () => Int, { defaultValue: 1 }) stepMinutes: number, @Ctx() context: GraphQLContext,
  ): Promise<AutoscalingPointType[]> {
    return await this.admin.metricsHistory.autoscaling(workspaceOf(context), deployment.id, from, to, stepMinutes);
  }

  @DatabaseCost(DATABASE_WEIGHTS.lookup)
  @FieldResolver(() => Int, { nullable: true })
  async progress(@Root() deployment: DeploymentType): Promise<number | null> {
    if (deployment.status !== 'Creating') return null;
    const starting = (await this.replicaRows(deployment)).filter((replica) => replica.status === 'Creating');
    return starting.length === 0 ? null : Math.min(...starting.map((replica) => replica.loadPercent ?? 0));
  }

  @FieldResolver(() => Int, {
    description: 'Requests waiting at the gateways for a first replica to start (the deployment scaled to zero, or its replica is starting), summed over every server; '
      + 'the console shows "starting: N requests waiting"',
  })
  waitingForReplica(@Root() deployment: DeploymentType): number {
    return this.admin.waitingForReplica(deployment.id);
  }

  private replicaRows(deployment: DeploymentType): Promise<Replica[]> {
    let read = this.replicaReads.get(deployment);
    if (!read) {
      read = this.admin.replicas.list(deployment.id);
      this.replicaReads.set(deployment, read);
    }
    return read;
  }

  @Mutation(() => DeploymentType, { description: 'Changes price cap, replica range, autoscale, default storage or sharing of idle capacity; in-flight requests are not dropped' })
  async updateDeployment(@Arg('id', () => ID) id: string, @Arg('input') input: UpdateDeploymentInput, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    const workspaceId = workspaceOf(context);
    const { clearStorageCredential, storageCredentialId, ...settings } = input;
    if (clearStorageCredential && storageCredentialId !== undefined) {
      throw new AppError('invalid_request', 'send storageCredentialId or clearStorageCredential, not both', { param: 'clearStorageCredential' });
    }
    const changes = { ...settings, ...(clearStorageCredential ? { storageCredentialId: null } : storageCredentialId !== undefined ? { storageCredentialId } : {}) };
    return this.toType(await this.admin.deployments.update(workspaceId, id, changes));
  }

  @Subscription(() => ReplicaLoadType, {
    description: 'Every load report (heartbeat) of the deployment\'s replicas',
    subscribe: servedBySubscriptionHub,
  })
  replicaLoad(@Root() load: ReplicaLoad, @Arg('deploymentId', () => ID) _deploymentId: string): ReplicaLoadType {
    return load;
  }

  /**
   * Run when a `replicaLoad` or `replicaLogLine` subscription starts (subscription-routes.ts),
   * and by `replicaLogs`: another
   * workspace's deployment is FORBIDDEN and an unknown one NOT_FOUND, as `deployment(id:)`
   * answers, instead of a subscription that is accepted and silently never fires.
   */
  async checkOwnDeployment(context: GraphQLContext, deploymentId: string): Promise<void> {
    // The cached owner, not the row: a client opening hundreds of subscriptions costs no query each.
    const workspaceId = workspaceOf(context);
    const owner = await this.admin.deploymentStore.ownerOf(deploymentId);
    if (owner === null) throw new AppError('not_found', `no deployment '${shortened(deploymentId)}'`, { param: 'deploymentId' });
    if (owner !== workspaceId) throw new AppError('permission_denied', `deployment '${shortened(deploymentId)}' belongs to another workspace`, { param: 'deploymentId' });
  }

  @Mutation(() => CreateDeploymentPayload, { description: 'Creates a deployment from the catalog and places its minimum replicas' })
  async createDeployment(@Arg('input') input: CreateDeploymentInput, @Ctx() context: GraphQLContext): Promise<CreateDeploymentPayload> {
    const { deployment, joinToken } = await this.admin.deployments.create(workspaceOf(context), {
      ...input, provider: input.provider as ProviderKind,
    });
    return { deployment: this.toType(deployment), joinToken };
  }

  @Mutation(() => DeploymentType, { description: 'Endpoint answers 503; replicas are released and billing stops' })
  async pauseDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.admin.deployments.pause(workspaceOf(context), id));
  }

  @Mutation(() => DeploymentType, { description: 'Places replicas again; the deployment goes through Creating' })
  async resumeDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.admin.deployments.resume(workspaceOf(context), id));
  }

  @Mutation(() => DeploymentType, { description: 'Endpoint answers 404; replicas are released' })
  async deleteDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.admin.deployments.delete(workspaceOf(context), id));
  }

  @Subscription(() => DeploymentType, {
    description: 'Fires when a deployment of the workspace changes status or settings',
    subscribe: servedBySubscriptionHub,
  })
  deploymentUpdated(@Root() deployment: Deployment): DeploymentType {
    return this.toType(deployment);
  }

  private toType(deployment: Deployment): DeploymentType {
    const {
      id, modelId, slug, status, statusReason, priceCapPerHour, minReplicas, maxReplicas, autoscale, desiredReplicas, provider, storageCredentialId,
      shareIdleCapacity, sharing, routingPolicy, maxLoras, maxCpuLoras, maxLoraRank, createdAt, updatedAt,
      scalingPolicy, scaleToZeroAfterSeconds, coldStartQueueLimit,
    } = deployment;
    // An instance, not a plain object: type-graphql copies a plain root into a new instance for
    // every field resolver, and `replicaRows` keys its one read on the root's identity.
    return Object.assign(new DeploymentType(), {
      id, modelId, slug, status, statusReason, priceCapPerHour, minReplicas, maxReplicas, autoscale, desiredReplicas, provider, storageCredentialId,
      createdAt, updatedAt, progress: null, replicaStartFailures: 0, shareIdleCapacity, sharing, routingPolicy, maxLoras, maxCpuLoras, maxLoraRank,
      scalingPolicy: scalingPolicy as ScalingPolicy, slo: sloOf(deployment), scaleToZeroAfterSeconds, coldStartQueueLimit,
      baseUrl: `${this.publicUrl()}/d/${slug}/v1`,
    });
  }
}

/** A replica as GraphQL shows it: its stored start-up phases with dates, and its cold start's length. */
function replicaView(replica: Replica): ReplicaType {
  return {
    ...replica,
    startupPhases: replica.startupPhases.map((phase) => ({
      name: phase.name, startedAt: new Date(phase.startedAt), durationMs: phase.durationMs, done: phase.done, detail: phase.detail,
      bytes: phase.name === 'download' ? phase.bytes : null,
    })),
    startupMs: replica.startedAt ? Math.max(0, replica.startedAt.getTime() - replica.createdAt.getTime()) : null,
  };
}
