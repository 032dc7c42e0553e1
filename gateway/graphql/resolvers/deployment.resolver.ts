import { Arg, Ctx, FieldResolver, ID, Mutation, Query, Resolver, Root, Subscription } from 'type-graphql';
import type { Deployment, ProviderKind } from '../../../control-plane/deployments/deployment.entity';
import type { ControlPlane } from '../../../control-plane/main';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { CreateDeploymentInput, CreateDeploymentPayload, DeploymentType, ReplicaType } from '../types/deployment.type';

export const DEPLOYMENT_UPDATED = 'DEPLOYMENT_UPDATED';

@Resolver(() => DeploymentType)
export class DeploymentResolver {
  constructor(private readonly controlPlane: ControlPlane, private readonly publicUrl: () => string) {}

  @Query(() => [DeploymentType], { description: 'Deployments of the workspace (deleted ones excluded)' })
  async deployments(@Ctx() context: GraphQLContext): Promise<DeploymentType[]> {
    return (await this.controlPlane.deployments.list(workspaceOf(context))).map((deployment) => this.toType(deployment));
  }

  @Query(() => DeploymentType)
  async deployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.controlPlane.deployments.get(workspaceOf(context), id));
  }

  @FieldResolver(() => [ReplicaType])
  async replicas(@Root() deployment: DeploymentType): Promise<ReplicaType[]> {
    return await this.controlPlane.replicas.list(deployment.id);
  }

  @Mutation(() => CreateDeploymentPayload, { description: 'Creates a deployment from the catalog and places its minimum replicas' })
  async createDeployment(@Arg('input') input: CreateDeploymentInput, @Ctx() context: GraphQLContext): Promise<CreateDeploymentPayload> {
    const { deployment, joinToken } = await this.controlPlane.deployments.create(workspaceOf(context), {
      ...input, provider: input.provider as ProviderKind,
    });
    return { deployment: this.toType(deployment), joinToken };
  }

  @Mutation(() => DeploymentType, { description: 'Endpoint answers 503; replicas are released and billing stops' })
  async pauseDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.controlPlane.deployments.pause(workspaceOf(context), id));
  }

  @Mutation(() => DeploymentType, { description: 'Places replicas again; the deployment goes through Creating' })
  async resumeDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.controlPlane.deployments.resume(workspaceOf(context), id));
  }

  @Mutation(() => DeploymentType, { description: 'Endpoint answers 404; replicas are released' })
  async deleteDeployment(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<DeploymentType> {
    return this.toType(await this.controlPlane.deployments.delete(workspaceOf(context), id));
  }

  @Subscription(() => DeploymentType, {
    topics: DEPLOYMENT_UPDATED,
    description: 'Fires when a deployment of the workspace changes status or settings',
    filter: ({ payload, context }: { payload: Deployment; context: GraphQLContext }) => payload.workspaceId === workspaceOf(context),
  })
  deploymentUpdated(@Root() deployment: Deployment): DeploymentType {
    return this.toType(deployment);
  }

  private toType(deployment: Deployment): DeploymentType {
    const { id, modelId, slug, status, statusReason, priceCapPerHour, minReplicas, maxReplicas, autoscale, provider, storageCredentialId, createdAt, updatedAt } = deployment;
    return {
      id, modelId, slug, status, statusReason, priceCapPerHour, minReplicas, maxReplicas, autoscale, provider, storageCredentialId, createdAt, updatedAt,
      baseUrl: `${this.publicUrl()}/d/${slug}/v1`,
    };
  }
}
