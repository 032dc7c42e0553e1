import { Arg, Ctx, ID, Mutation, Query, Resolver } from 'type-graphql';
import type { AdminPort, ApiKey } from '../../../control-plane/api/admin';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { ApiKeyLimitsInput, ApiKeyType, ApiKeyWithSecret, CreateApiKeyInput } from '../types/api-key.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

@Resolver()
export class ApiKeyResolver {
  constructor(private readonly admin: Pick<AdminPort, 'apiKeys'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [ApiKeyType], { description: 'Active API keys of the workspace (never their plaintext)' })
  async apiKeys(@Ctx() context: GraphQLContext): Promise<ApiKeyType[]> {
    return (await this.admin.apiKeys.list(workspaceOf(context))).map(toApiKeyType);
  }

  @Mutation(() => ApiKeyWithSecret, { description: 'Creates a key; its plaintext is returned this once' })
  async createApiKey(@Arg('input') input: CreateApiKeyInput, @Ctx() context: GraphQLContext): Promise<ApiKeyWithSecret> {
    const { apiKey, plaintext } = await this.admin.apiKeys.create(workspaceOf(context), input.name, input);
    return { apiKey: toApiKeyType(apiKey), plaintext };
  }

  @Mutation(() => ApiKeyWithSecret, { description: 'Issues a new plaintext; the old one stops working at once' })
  async regenerateApiKey(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ApiKeyWithSecret> {
    const { apiKey, plaintext } = await this.admin.apiKeys.regenerate(workspaceOf(context), id);
    return { apiKey: toApiKeyType(apiKey), plaintext };
  }

  @Mutation(() => ApiKeyType, { description: 'Revokes a key at once' })
  async revokeApiKey(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ApiKeyType> {
    return toApiKeyType(await this.admin.apiKeys.revoke(workspaceOf(context), id));
  }

  @Mutation(() => ApiKeyType, { description: 'Sets the RPM and/or TPD limit of a key' })
  async setApiKeyLimits(@Arg('id', () => ID) id: string, @Arg('limits') limits: ApiKeyLimitsInput, @Ctx() context: GraphQLContext): Promise<ApiKeyType> {
    return toApiKeyType(await this.admin.apiKeys.setLimits(workspaceOf(context), id, limits));
  }
}

export function toApiKeyType(apiKey: ApiKey): ApiKeyType {
  const { id, name, displayPrefix, rpmLimit, tpdLimit, createdAt, regeneratedAt } = apiKey;
  return { id, name, displayPrefix, rpmLimit, tpdLimit, createdAt, regeneratedAt };
}
