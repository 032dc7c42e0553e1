import 'reflect-metadata';
import type { GraphQLSchema } from 'graphql';
import { buildSchemaSync, type ContainerType, type PubSub } from 'type-graphql';
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
import { MetricsHistoryResolver } from './resolvers/metrics-history.resolver';
import { RequestLogResolver } from './resolvers/request-log.resolver';
import { ReplicaLogResolver } from './resolvers/replica-log.resolver';
import { PlaygroundResolver } from './resolvers/playground.resolver';
import { AdapterResolver } from './resolvers/adapter.resolver';

export const RESOLVERS = [
  CatalogResolver, ApiKeyResolver, DeploymentResolver, StorageCredentialResolver, RequestResolver, WebhookResolver, CapacityResolver, BillingResolver, WorkspaceResolver, SharingResolver, ConsoleResolver, BatchResolver, BudgetResolver,
  MetricsHistoryResolver, RequestLogResolver, ReplicaLogResolver, PlaygroundResolver, AdapterResolver,
] as const;

/**
 * The schema from the resolvers; `container` supplies resolver instances built with their
 * dependencies. Subscriptions are served by a SubscriptionHub, which sets their `subscribe`.
 */
export function buildGatewaySchema(options: { container?: ContainerType } = {}): GraphQLSchema {
  return buildSchemaSync({
    resolvers: [...RESOLVERS],
    container: options.container,
    // type-graphql wants one even when every subscription brings its own `subscribe`: none is used.
    pubSub: { publish: () => {}, subscribe: () => { throw new Error('no pub/sub'); } } as unknown as PubSub,
    validate: false,
    emitSchemaFile: false,
  });
}
