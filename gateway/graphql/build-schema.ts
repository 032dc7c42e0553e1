import 'reflect-metadata';
import type { GraphQLFieldResolver, GraphQLSchema } from 'graphql';
import type { PubSub, ResolverData } from 'type-graphql';
import { buildSchemaSync, type ContainerType } from 'type-graphql';
import type { GraphQLContext } from './graphql-context';
import { ApiKeyResolver } from './resolvers/api-key.resolver';
import { BillingResolver } from './resolvers/billing.resolver';
import { CapacityResolver } from './resolvers/capacity.resolver';
import { CatalogResolver } from './resolvers/catalog.resolver';
import { DeploymentResolver } from './resolvers/deployment.resolver';
import { RequestResolver } from './resolvers/request.resolver';
import { StorageCredentialResolver } from './resolvers/storage-credential.resolver';
import { WebhookResolver } from './resolvers/webhook.resolver';
import { WorkspaceResolver } from './resolvers/workspace.resolver';
import { SharingResolver } from './resolvers/sharing.resolver';
import { ConsoleResolver } from './resolvers/console.resolver';
import { BatchResolver } from './resolvers/batch.resolver';
import { BudgetResolver } from './resolvers/budget.resolver';

export const RESOLVERS = [
  CatalogResolver, ApiKeyResolver, DeploymentResolver, StorageCredentialResolver, RequestResolver, WebhookResolver, CapacityResolver, BillingResolver, WorkspaceResolver, SharingResolver, ConsoleResolver, BatchResolver, BudgetResolver,
] as const;

/** The schema from the resolvers; `container` supplies resolver instances built with their dependencies. */
export function buildGatewaySchema(options: { container?: ContainerType; pubSub?: PubSub } = {}): GraphQLSchema {
  const schema = buildSchemaSync({
    resolvers: [...RESOLVERS],
    container: options.container,
    pubSub: options.pubSub ?? { publish: () => {}, subscribe: () => { throw new Error('no pub/sub'); } } as unknown as PubSub,
    validate: false,
    emitSchemaFile: false,
  });
  if (options.container) {
    const deployments = options.container.get(DeploymentResolver, {} as ResolverData) as DeploymentResolver;
    checkBeforeSubscribing(schema, 'replicaLoad', (args, context) => deployments.checkReplicaLoadSubscription(context, String(args.deploymentId)));
    const batches = options.container.get(BatchResolver, {} as ResolverData) as BatchResolver;
    checkBeforeSubscribing(schema, 'batchUpdated', (args, context) => batches.checkBatchUpdatedSubscription(context, args.deploymentId as string | null | undefined));
  }
  return schema;
}

/**
 * type-graphql builds a subscription's `subscribe` from its topics and filter, without the
 * resolver instance, and a filter only sees events: too late to refuse a subscription to a
 * record the caller may not read. `check` runs first; what it throws ends the subscribe with
 * that error (graphql-ws sends it as the operation's result, as for a query).
 */
function checkBeforeSubscribing(
  schema: GraphQLSchema, fieldName: string, check: (args: Record<string, unknown>, context: GraphQLContext) => Promise<void>,
): void {
  const field = schema.getSubscriptionType()?.getFields()[fieldName];
  const subscribe = field?.subscribe;
  if (!field || !subscribe) throw new Error(`no subscription '${fieldName}' to check`);
  const checked: GraphQLFieldResolver<unknown, GraphQLContext> = async (source, args, context, info) => {
    await check(args, context);
    return await subscribe(source, args, context, info);
  };
  field.subscribe = checked;
}
