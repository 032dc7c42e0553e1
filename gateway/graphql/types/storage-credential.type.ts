import { Field, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('StorageCredential', { description: "A customer's own S3-compatible bucket for image/video outputs (never shows the secret)" })
export class StorageCredentialType {
  @Field(() => Int, { description: 'The storage_credential_id of image/video requests' }) id: number;
  @Field() name: string;
  @Field() provider: string;
  @Field(() => String, { nullable: true, description: 'S3-compatible endpoint; null for AWS S3' }) endpoint: string | null;
  @Field() region: string;
  @Field() bucket: string;
  @Field() keyPrefix: string;
  @Field({ description: 'The access key id, masked to its last 4 characters' }) accessKeyId: string;
  @Field({ description: 'unverified, verified or failed; only verified credentials receive outputs' }) status: string;
  @Field(() => String, { nullable: true, description: 'Why the last verification failed' }) statusMessage: string | null;
  @Field(() => Date, { nullable: true }) verifiedAt: Date | null;
  @Field() createdAt: Date;
}

@InputType()
export class CreateStorageCredentialInput {
  @Field() name: string;
  @Field({ defaultValue: 's3' }) provider: string;
  @Field(() => String, { nullable: true }) endpoint?: string | null;
  @Field() region: string;
  @Field() bucket: string;
  @Field(() => String, { nullable: true }) keyPrefix?: string | null;
  @Field() accessKeyId: string;
  @Field() secretAccessKey: string;
}

@ObjectType('Request', { description: 'An image or video job (the request record of docs/api-contract.md)' })
export class RequestType {
  @Field(() => ID) id: string;
  @Field() deploymentId: string;
  @Field({ description: 'image or video' }) modality: string;
  @Field({ description: 'queued, running, succeeded, failed or canceled' }) status: string;
  @Field(() => Int) progress: number;
  @Field(() => String, { nullable: true }) outputObjectKey: string | null;
  @Field(() => String, { nullable: true }) outputBucket: string | null;
  @Field(() => String, { nullable: true }) storageProvider: string | null;
  @Field(() => String, { nullable: true }) errorCode: string | null;
  @Field(() => String, { nullable: true }) errorMessage: string | null;
  @Field({ description: 'GPU seconds attributed to the job: its run time when it succeeded, 0 when it failed or was canceled' })
  billedGpuSeconds: number;
  @Field() queuedAt: Date;
  @Field(() => Date, { nullable: true }) startedAt: Date | null;
  @Field(() => Date, { nullable: true }) completedAt: Date | null;
}
