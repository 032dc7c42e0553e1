import 'reflect-metadata';
import type { GraphQLSchema } from 'graphql';
import type { PubSub } from 'type-graphql';
import { buildSchemaSync, type ContainerType } from 'type-graphql';
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

export const RESOLVERS = [
  CatalogResolver, ApiKeyResolver, DeploymentResolver, StorageCredentialResolver, RequestResolver, WebhookResolver, CapacityResolver, BillingResolver, WorkspaceResolver, SharingResolver, ConsoleResolver,
] as const;

/** The schema from the resolvers; `container` supplies resolver instances built with their dependencies. */
export function buildGatewaySchema(options: { container?: ContainerType; pubSub?: PubSub } = {}): GraphQLSchema {
  return buildSchemaSync({
    resolvers: [...RESOLVERS],
    container: options.container,
    pubSub: options.pubSub ?? { publish: () => {}, subscribe: () => { throw new Error('no pub/sub'); } } as unknown as PubSub,
    validate: false,
    emitSchemaFile: false,
  });
}
