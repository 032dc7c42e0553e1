import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('Replica', { description: 'One running copy of a deployment (a worker agent and its engine)' })
export class ReplicaType {
  @Field(() => ID) id: string;
  @Field({ description: 'Creating, Running, Unhealthy or Terminated' }) status: string;
  @Field(() => String, { nullable: true }) statusReason: string | null;
  @Field() provider: string;
  @Field(() => String, { nullable: true }) agentId: string | null;
  @Field(() => String, { nullable: true }) engineKind: string | null;
  @Field(() => String, { nullable: true }) engineVersion: string | null;
  @Field(() => Int, { nullable: true }) maxConcurrency: number | null;
  @Field() createdAt: Date;
  @Field(() => Date, { nullable: true }) startedAt: Date | null;
  @Field(() => Date, { nullable: true }) terminatedAt: Date | null;
}

@ObjectType('Deployment', { description: 'One model served at its own OpenAI-compatible endpoint' })
export class DeploymentType {
  @Field(() => ID) id: string;
  @Field() modelId: string;
  @Field() slug: string;
  @Field({ description: 'OpenAI base URL of this deployment, ending in /v1' }) baseUrl: string;
  @Field({ description: 'Creating, Running, Paused or Deleted' }) status: string;
  @Field(() => String, { nullable: true }) statusReason: string | null;
  @Field(() => Float, { description: 'Max price per replica-hour' }) priceCapPerHour: number;
  @Field(() => Int) minReplicas: number;
  @Field(() => Int) maxReplicas: number;
  @Field() autoscale: boolean;
  @Field({ description: 'local (agents on this host) or external (agents join with a token)' }) provider: string;
  @Field(() => Int, { nullable: true, description: 'Image/video models: the default output bucket (a storage credential); null = Managed' })
  storageCredentialId: number | null;
  @Field() createdAt: Date;
  @Field() updatedAt: Date;
}

@ObjectType()
export class CreateDeploymentPayload {
  @Field(() => DeploymentType) deployment: DeploymentType;
  @Field(() => String, { nullable: true, description: 'For external deployments: the token agents join with, shown once' })
  joinToken: string | null;
}

@InputType()
export class CreateDeploymentInput {
  @Field() modelId: string;
  @Field(() => Float) priceCapPerHour: number;
  @Field(() => Int, { defaultValue: 1 }) minReplicas: number;
  @Field(() => Int, { defaultValue: 1 }) maxReplicas: number;
  @Field({ defaultValue: false }) autoscale: boolean;
  @Field({ defaultValue: 'local' }) provider: string;
  @Field(() => Int, { nullable: true, description: 'Image/video models: a verified storage credential as the default output bucket' })
  storageCredentialId?: number | null;
}
