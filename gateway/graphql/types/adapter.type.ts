import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('AdapterDeployment', { description: 'A deployment an adapter is attached to' })
export class AdapterDeploymentType {
  @Field(() => ID) id: string;
  @Field({ description: 'Its slug, the name in its base URL' }) name: string;
}

@ObjectType('AdapterResidency', {
  description: 'One replica holding (or loading) an adapter: from its agent\'s latest heartbeat when connected to the answering server, else from its server\'s registry row (state only)',
})
export class AdapterResidencyType {
  @Field(() => ID) replicaId: string;
  @Field(() => ID) deploymentId: string;
  @Field(() => ID, { description: 'The control-plane server its agent is connected to' }) serverId: string;
  @Field(() => Int, { description: 'The revision it holds (an older one while its requests finish)' }) revision: number;
  @Field({ description: 'GPU, CPU, LOADING or FAILED (FAILED only from the answering server\'s own agents)' }) state: string;
  @Field(() => Int, { nullable: true, description: 'How long its last load took, ms (0 while loading); null for a replica connected to another server' }) loadMs: number | null;
  @Field(() => String, { nullable: true, description: 'FAILED: why' }) error: string | null;
  @Field(() => Date, { nullable: true }) lastUsedAt: Date | null;
}

@ObjectType('AdapterUsage', { description: 'An adapter\'s requests and tokens in a range (its owner\'s and guests\')' })
export class AdapterUsageType {
  @Field(() => Int) requests: number;
  @Field(() => Float) promptTokens: number;
  @Field(() => Float) completionTokens: number;
  @Field(() => Float) totalTokens: number;
}

@ObjectType('Adapter', { description: 'A LoRA adapter of the workspace, addressed by its name in `model` (docs/adapters.md)' })
export class AdapterType {
  @Field(() => ID) id: string;
  @Field({ description: 'What clients put in model: unique in the workspace' }) name: string;
  @Field({ description: 'The catalog model it was trained on; it attaches only to deployments of that model' }) baseModel: string;
  @Field(() => Int) rank: number;
  @Field({ description: 'GGUF, PEFT_TAR, SAFETENSORS or HUGGING_FACE' }) format: string;
  @Field({ description: 'Where its weights came from: file:<file id>, bucket:<key> or hf:<org/name[@revision]>' }) source: string;
  @Field(() => Int, { description: 'Replacing the weights makes a new revision; requests in flight finish on the old one' }) revision: number;
  @Field(() => String, { nullable: true, description: 'SHA-256 of the weights (null for HUGGING_FACE)' }) sha256: string | null;
  @Field(() => Float, { nullable: true }) sizeBytes: number | null;
  @Field({ description: 'Offered to guests of shared serving as shared/<adapter id>, at the owner\'s per-token price of the base' }) sharedWithGuests: boolean;
  @Field({ description: 'true only on the adapterUpdated event of its deletion' }) deleted: boolean;
  @Field() createdAt: Date;
  @Field() updatedAt: Date;
  /** Its attachments when already known (an event carries them): not a field, read by the field resolvers. */
  deploymentIds?: readonly string[];
}

@InputType({ description: 'New weights: exactly one of fileId, bucketKey (with deploymentId) and huggingFaceRepo' })
export class AdapterWeightsInput {
  @Field(() => Int, { nullable: true, description: 'Its LoRA rank: read from the weights and checked when given; required for huggingFaceRepo' }) rank?: number;
  @Field({ nullable: true, description: 'A Files API upload of the workspace with purpose "user_data"' }) fileId?: string;
  @Field({ nullable: true, description: 'An object key in the bucket of deploymentId' }) bucketKey?: string;
  @Field(() => ID, { nullable: true, description: 'The deployment whose bucket (storage credential) holds bucketKey' }) deploymentId?: string;
  @Field({ nullable: true, description: 'org/name[@revision]: fetched by the engine host' }) huggingFaceRepo?: string;
  @Field({ nullable: true, description: 'GGUF, PEFT_TAR, SAFETENSORS or HUGGING_FACE; read from the bytes when left out' }) format?: string;
  @Field({ nullable: true, description: 'sha256:<hex> of the weights, checked' }) checksum?: string;
}

@InputType()
export class CreateAdapterInput extends AdapterWeightsInput {
  @Field({ description: '1–64 characters [A-Za-z0-9][A-Za-z0-9._-]*, unique in the workspace' }) name: string;
  @Field({ description: 'A catalog chat or completion model id' }) baseModel: string;
}
