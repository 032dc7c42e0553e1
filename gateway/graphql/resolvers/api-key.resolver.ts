import { Arg, Ctx, ID, Mutation, Query, Resolver } from 'type-graphql';
import type { ApiKey } from '../../../control-plane/api/admin';
import type { ControlPlane } from '../../../control-plane/api/startup';
import { workspaceOf, type GraphQLContext } from '../graphql-context';
import { ApiKeyLimitsInput, ApiKeyType, ApiKeyWithSecret, CreateApiKeyInput } from '../types/api-key.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

@Resolver()
export class ApiKeyResolver {
  constructor(private readonly controlPlane: ControlPlane) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [ApiKeyType], { description: 'Active API keys of the workspace (never their plaintext)' })
  async apiKeys(@Ctx() context: GraphQLContext): Promise<ApiKeyType[]> {
    return (await this.controlPlane.apiKeys.list(workspaceOf(context))).map(toApiKeyType);
  }

  @Mutation(() => ApiKeyWithSecret, { description: 'Creates a key; its plaintext is returned this once' })
  async createApiKey(@Arg('input') input: CreateApiKeyInput, @Ctx() context: GraphQLContext): Promise<ApiKeyWithSecret> {
    const { apiKey, plaintext } = await this.controlPlane.apiKeys.create(workspaceOf(context), input.name, input);
    return { apiKey: toApiKeyType(apiKey), plaintext };
  }

  @Mutation(() => ApiKeyWithSecret, { description: 'Issues a new plaintext; the old one stops working at once' })
  async regenerateApiKey(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ApiKeyWithSecret> {
    const { apiKey, plaintext } = await this.controlPlane.apiKeys.regenerate(workspaceOf(context), id);
    return { apiKey: toApiKeyType(apiKey), plaintext };
  }

  @Mutation(() => ApiKeyType, { description: 'Revokes a key at once' })
  async revokeApiKey(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<ApiKeyType> {
    return toApiKeyType(await this.controlPlane.apiKeys.revoke(workspaceOf(context), id));
  }

  @Mutation(() => ApiKeyType, { description: 'Sets the RPM and/or TPD limit of a key' })
  async setApiKeyLimits(@Arg('id', () => ID) id: string, @Arg('limits') limits: ApiKeyLimitsInput, @Ctx() context: GraphQLContext): Promise<ApiKeyType> {
    return toApiKeyType(await this.controlPlane.apiKeys.setLimits(workspaceOf(context), id, limits));
  }
}

export function toApiKeyType(apiKey: ApiKey): ApiKeyType {
  const { id, name, displayPrefix, rpmLimit, tpdLimit, createdAt, regeneratedAt } = apiKey;
  return { id, name, displayPrefix, rpmLimit, tpdLimit, createdAt, regeneratedAt };
}
