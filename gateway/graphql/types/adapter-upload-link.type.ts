import { Field, ID, InputType, Int, ObjectType } from 'type-graphql';

@InputType({ description: 'A file to upload as adapter weights: its name, its size, and the deployment whose Files API keeps it' })
export class AdapterUploadLinkInput {
  @Field({ description: 'The file\'s name, as the Files API lists it (up to 512 characters)' }) filename: string;
  @Field(() => Int, { description: 'Its size in bytes: the upload may not be longer (at most FILES_MAX_BYTES and ADAPTER_MAX_BYTES)' }) bytes: number;
  @Field(() => ID, { description: 'A deployment of the workspace (a chat, completion or embedding model) whose Files API keeps the file, in its bucket when it has one' }) deploymentId: string;
}

@ObjectType('AdapterUploadLink', { description: 'A signed one-time link: PUT the file\'s raw bytes to it (with content-length), then register them with createAdapter(fileId) or updateAdapterWeights(fileId)' })
export class AdapterUploadLinkType {
  @Field({ description: 'The link on the gateway\'s public URL; it authorizes itself (no API key)' }) url: string;
  @Field({ description: 'The same link as a path on the gateway\'s origin (what the console uses, whatever host name it was opened under)' }) path: string;
  @Field(() => ID, { description: 'The Files API file (purpose user_data) the upload creates' }) fileId: string;
  @Field({ description: 'Until then the upload may start; the link works once' }) expiresAt: Date;
  @Field(() => Int, { description: 'The most bytes the upload may carry' }) bytes: number;
}
