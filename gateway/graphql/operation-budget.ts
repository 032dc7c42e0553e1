import type { ApolloServerPlugin } from '@apollo/server';
import type { GraphQLSchema } from 'graphql';
import { AppError } from '../../control-plane/api/errors';
import type { TenantBudget } from '../../control-plane/api/inference';
import type { GraphQLContext } from './graphql-context';
import { databaseCostOfOperation } from './query-limits';

/** What an operation holds while it runs; given back once. */
export interface OperationHold {
  release(): void;
}

/**
 * What a GraphQL query or mutation holds of the tenant budget while it runs, over HTTP and
 * over graphql-ws alike: one of its key's `graphql_operations` (a key ran any number at once)
 * and its estimated database cost in `graphql_cost` (query-limits.ts: four 450-alias `usage`
 * queries held the whole connection pool, issue 33). Both or neither: the refusal names the
 * budget (RATE_LIMITED for the key's share, UNAVAILABLE for the server's) and nothing is held.
 * The operator token and sign-in have no key: they count in the server's share only.
 */
export function holdOperation(budget: TenantBudget, caller: GraphQLContext, databaseCost: number): OperationHold | AppError {
  const holder = { keyId: caller.key?.id ?? null, workspaceId: caller.key?.workspaceId ?? null };
  const operation = budget.take('graphql_operations', holder);
  if (operation instanceof AppError) return operation;
  if (databaseCost <= 0) return operation;
  const cost = budget.take('graphql_cost', holder, databaseCost);
  if (cost instanceof AppError) {
    operation.release();
    return cost;
  }
  return {
    release() {
      cost.release();
      operation.release();
    },
  };
}

/**
 * Apollo's side: the hold is taken once the operation is known (parsed and validated, before
 * any resolver runs) and kept until the HTTP middleware's `release`, which runs on every path
 * the request ends by. Apollo hands resolvers a copy of the context object, so holds are kept
 * by what the copy shares: the operation's QuerySlots. `refuse` throws the refusal as Apollo
 * sends it (its HTTP status and Retry-After).
 */
export function operationBudgetPlugin(schema: GraphQLSchema, budget: TenantBudget, refuse: (error: AppError) => never) {
  const holds = new WeakMap<object, OperationHold>();
  const keyOf = (context: GraphQLContext): object => context.database ?? context;
  const plugin: ApolloServerPlugin<GraphQLContext> = {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue, document, operation, request }) {
          // Subscriptions are refused over HTTP (graphql-server.ts); nothing runs to hold for.
          if (operation?.operation === 'subscription') return;
          const hold = holdOperation(budget, contextValue, databaseCostOfOperation(schema, document, request.operationName));
          if (hold instanceof AppError) refuse(hold);
          holds.set(keyOf(contextValue), hold);
        },
      };
    },
  };
  return {
    plugin,
    release(context: GraphQLContext): void {
      holds.get(keyOf(context))?.release();
      holds.delete(keyOf(context));
    },
  };
}
