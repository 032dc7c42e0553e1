import { Arg, Ctx, Float, ID, Mutation, Query, Resolver } from 'type-graphql';
import { type AdminPort, BUDGETS } from '../../../control-plane/api/admin';
import { requireOperator, workspaceOf, type GraphQLContext } from '../graphql-context';
import { BudgetType } from '../types/budget.type';
import { DatabaseCost, DATABASE_WEIGHTS } from '../database-cost';

/** The tenant budget as a workspace sees its own limits, and as the operator sets them. */
@Resolver()
export class BudgetResolver {
  constructor(private readonly admin: Pick<AdminPort, 'budget' | 'workspaceBudgets'>) {}

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [BudgetType], { description: 'This workspace\'s limits: every budget and scope, with what it holds now on this server' })
  budgets(@Ctx() context: GraphQLContext): BudgetType[] {
    return this.view(workspaceOf(context));
  }

  @DatabaseCost(DATABASE_WEIGHTS.memory)
  @Query(() => [BudgetType], { description: 'Operator: a workspace\'s limits' })
  workspaceBudgets(@Arg('workspaceId', () => ID) workspaceId: string, @Ctx() context: GraphQLContext): BudgetType[] {
    requireOperator(context);
    return this.view(workspaceId);
  }

  @Mutation(() => [BudgetType], { description: 'Operator: sets one limit of a workspace (scope key or workspace; value null returns to the default). local_replicas per workspace grants the server host\'s local capacity' })
  async setWorkspaceBudget(
    @Arg('workspaceId', () => ID) workspaceId: string, @Arg('budget') budget: string, @Arg('scope') scope: string,
    // Not `limit`: query-limits.ts reads an argument of that name as a list's size.
    @Arg('value', () => Float, { nullable: true, description: 'The new limit; null: the default' }) value: number | null | undefined, @Ctx() context: GraphQLContext,
  ): Promise<BudgetType[]> {
    requireOperator(context);
    await this.admin.workspaceBudgets.set(workspaceId, budget, scope, value ?? null);
    return this.view(workspaceId);
  }

  private view(workspaceId: string): BudgetType[] {
    return this.admin.workspaceBudgets.effective(workspaceId).map((limit) => {
      const definition = BUDGETS[limit.budget];
      const held = definition.kind === 'held' && limit.scope === 'workspace' ? this.admin.budget.used(limit.budget, 'workspace', { workspaceId }) : null;
      return {
        budget: limit.budget, scope: limit.scope, counts: definition.counts, unit: definition.unit, kind: definition.kind,
        limit: limit.limit, defaultLimit: limit.default, overridden: limit.overridden, heldOnThisServer: held,
      };
    });
  }
}
