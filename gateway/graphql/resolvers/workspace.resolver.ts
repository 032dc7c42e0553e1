import { Arg, Ctx, ID, Mutation, Query, Resolver } from 'type-graphql';
import type { AdminPort } from '../../../control-plane/api/admin';
import { requireOperator, type GraphQLContext } from '../graphql-context';
import { DecimalScalar } from '../types/decimal.scalar';
import { CreateWorkspacePayload, WorkspaceType } from '../types/workspace.type';
import { toApiKeyType } from './api-key.resolver';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** Operator administration of workspaces (the operator token). */
@Resolver()
export class WorkspaceResolver {
  constructor(private readonly admin: Pick<AdminPort, 'workspaceAdmin'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.list)
  @Query(() => [WorkspaceType], { description: 'Operator: workspaces with their prepaid credit, oldest first' })
  async workspaces(@Arg('includeDeleted', { defaultValue: false }) includeDeleted: boolean, @Ctx() context: GraphQLContext): Promise<WorkspaceType[]> {
    requireOperator(context);
    return await this.admin.workspaceAdmin.list({ includeDeleted });
  }

  @Mutation(() => CreateWorkspacePayload, { description: 'Operator: a workspace and its first API key (plaintext shown once); with creditBalance it is prepaid, without postpaid' })
  async createWorkspace(
    @Arg('name') name: string, @Ctx() context: GraphQLContext,
    @Arg('creditBalance', () => DecimalScalar, { nullable: true }) creditBalance: string | null | undefined,
  ): Promise<CreateWorkspacePayload> {
    requireOperator(context);
    const { workspace, apiKey, plaintext } = await this.admin.workspaceAdmin.create(name, creditBalance);
    return { workspace, apiKey: toApiKeyType(apiKey), plaintext };
  }

  @Mutation(() => WorkspaceType, { description: 'Operator: revokes every key, deletes every deployment; the workspace and its ledger stay for audit' })
  async deleteWorkspace(@Arg('id', () => ID) id: string, @Ctx() context: GraphQLContext): Promise<WorkspaceType> {
    requireOperator(context);
    return await this.admin.workspaceAdmin.delete(id);
  }
}
