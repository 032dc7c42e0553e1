import { Field, ID, ObjectType } from 'type-graphql';
import { ApiKeyType } from './api-key.type';
import { DecimalScalar } from './decimal.scalar';

@ObjectType('Workspace', { description: 'A tenant and its prepaid credit (operator view)' })
export class WorkspaceType {
  @Field(() => ID) id: string;
  @Field() name: string;
  @Field(() => DecimalScalar, { nullable: true, description: 'Prepaid credit; null when postpaid (no limit). Equals the sum of the workspace\'s ledger rows' })
  creditBalance: string | null;
  @Field() createdAt: Date;
  @Field(() => Date, { nullable: true, description: 'Set once deleted: its keys are revoked and its deployments deleted; the ledger stays' })
  deletedAt: Date | null;
}

@ObjectType({ description: 'A new workspace with its first API key; the plaintext is shown this once' })
export class CreateWorkspacePayload {
  @Field(() => WorkspaceType) workspace: WorkspaceType;
  @Field(() => ApiKeyType) apiKey: ApiKeyType;
  @Field({ description: 'mk-… plaintext of the first key; store it now, it cannot be shown again' }) plaintext: string;
}
