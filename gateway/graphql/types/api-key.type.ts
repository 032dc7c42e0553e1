import { GraphQLSafeInt } from 'graphql-scalars';
import { Field, ID, InputType, Int, ObjectType } from 'type-graphql';

@ObjectType('ApiKey', { description: 'A workspace API key; the plaintext is only ever returned by create and regenerate' })
export class ApiKeyType {
  @Field(() => ID) id: string;
  @Field() name: string;
  @Field({ description: 'First characters of the key, to tell keys apart' }) displayPrefix: string;
  @Field(() => Int, { description: 'Requests per minute' }) rpmLimit: number;
  @Field(() => GraphQLSafeInt, { description: 'Tokens per UTC day' }) tpdLimit: number;
  @Field() createdAt: Date;
  @Field(() => Date, { nullable: true }) regeneratedAt: Date | null;
}

@ObjectType({ description: 'A key with its plaintext, shown this once' })
export class ApiKeyWithSecret {
  @Field(() => ApiKeyType) apiKey: ApiKeyType;
  @Field({ description: 'mk-… plaintext; store it now, it cannot be shown again' }) plaintext: string;
}

@InputType()
export class CreateApiKeyInput {
  @Field() name: string;
  @Field(() => Int, { nullable: true }) rpmLimit?: number;
  @Field(() => GraphQLSafeInt, { nullable: true }) tpdLimit?: number;
}

@InputType()
export class ApiKeyLimitsInput {
  @Field(() => Int, { nullable: true }) rpmLimit?: number;
  @Field(() => GraphQLSafeInt, { nullable: true }) tpdLimit?: number;
}
