import type http from 'node:http';
import { ApolloServer, HeaderMap } from '@apollo/server';
import { unwrapResolverError } from '@apollo/server/errors';
import { createPubSub } from '@graphql-yoga/subscription';
import { specifiedRules, validate, type GraphQLFormattedError } from 'graphql';
import { hashSecret, sameHash } from '../../control-plane/secrets';
import { queryLimitRules } from './query-limits';
import { useServer } from 'graphql-ws/use/ws';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import type { PubSub } from 'type-graphql';
import { WebSocketServer } from 'ws';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { ERROR_TABLE } from '../errors/error-table';
import { bearerToken } from '../http/bearer-token';
import { readBody } from '../http/read-body';
import { buildGatewaySchema } from './build-schema';
import type { GraphQLContext } from './graphql-context';
import { ApiKeyResolver } from './resolvers/api-key.resolver';
import { BillingResolver } from './resolvers/billing.resolver';
import { CapacityResolver } from './resolvers/capacity.resolver';
import { CatalogResolver } from './resolvers/catalog.resolver';
import { DEPLOYMENT_UPDATED, DeploymentResolver, REPLICA_LOAD } from './resolvers/deployment.resolver';
import { REQUEST_UPDATED, RequestResolver } from './resolvers/request.resolver';
import { StorageCredentialResolver } from './resolvers/storage-credential.resolver';
import { WEBHOOK_ATTEMPT_LOGGED, WebhookResolver } from './resolvers/webhook.resolver';

export const GRAPHQL_PATH = '/graphql';

/**
 * Apollo Server for queries and mutations (called from a Koa middleware on `/graphql`) and
 * graphql-ws for subscriptions on the same path and port. Both authenticate with a workspace key.
 */
export class GraphQLServer {
  private readonly apollo: ApolloServer<GraphQLContext>;
  private readonly websockets: WebSocketServer;
  private readonly disposeWebsockets: () => Promise<void>;
  private readonly unsubscribe: () => void;
  /** Hashed once: each caller's token is hashed and compared to it in constant time. */
  private readonly operatorTokenHash: string | null;

  constructor(private readonly controlPlane: ControlPlane, httpServer: http.Server, publicUrl: () => string, private readonly maxBodyBytes: number, logger: Logger) {
    this.operatorTokenHash = controlPlane.config.operatorToken ? hashSecret(controlPlane.config.operatorToken) : null;
    const pubSub = createPubSub();
    const instances = new Map<unknown, unknown>([
      [CatalogResolver, new CatalogResolver(controlPlane)],
      [ApiKeyResolver, new ApiKeyResolver(controlPlane)],
      [DeploymentResolver, new DeploymentResolver(controlPlane, publicUrl)],
      [StorageCredentialResolver, new StorageCredentialResolver(controlPlane)],
      [RequestResolver, new RequestResolver(controlPlane)],
      [WebhookResolver, new WebhookResolver(controlPlane)],
      [CapacityResolver, new CapacityResolver(controlPlane)],
      [BillingResolver, new BillingResolver(controlPlane)],
    ]);
    const schema = buildGatewaySchema({ container: { get: (type) => instances.get(type) }, pubSub: pubSub as unknown as PubSub });
    const forward = (deployment: unknown) => pubSub.publish(DEPLOYMENT_UPDATED, deployment as never);
    const forwardRequest = (record: unknown) => pubSub.publish(REQUEST_UPDATED, record as never);
    const forwardAttempt = (attempt: unknown) => pubSub.publish(WEBHOOK_ATTEMPT_LOGGED, attempt as never);
    const forwardLoad = (load: unknown) => pubSub.publish(REPLICA_LOAD, load as never);
    controlPlane.events.on('deploymentUpdated', forward);
    controlPlane.events.on('requestUpdated', forwardRequest);
    controlPlane.events.on('webhookAttemptLogged', forwardAttempt);
    controlPlane.events.on('replicaLoad', forwardLoad);
    this.unsubscribe = () => {
      controlPlane.events.off('deploymentUpdated', forward);
      controlPlane.events.off('requestUpdated', forwardRequest);
      controlPlane.events.off('webhookAttemptLogged', forwardAttempt);
      controlPlane.events.off('replicaLoad', forwardLoad);
    };

    this.apollo = new ApolloServer<GraphQLContext>({
      schema,
      introspection: true,
      // Apollo would otherwise handle SIGINT/SIGTERM itself and re-raise them, killing the
      // process before the server drains its agents and stops the database.
      stopOnTerminationSignals: false,
      validationRules: queryLimitRules(),
      formatError: (formatted, error) => formatGraphQLError(formatted, error, logger),
    });
    this.websockets = new WebSocketServer({ server: httpServer, path: GRAPHQL_PATH });
    const limits = queryLimitRules();
    const cleanup = useServer<Record<string, unknown>, { caller?: GraphQLContext }>({
      schema,
      validate: (validatedSchema, document) => validate(validatedSchema, document, [...specifiedRules, ...limits]),
      onConnect: async (context) => {
        const header = context.connectionParams?.authorization ?? context.connectionParams?.Authorization;
        const caller = await this.callerFrom(typeof header === 'string' ? header : undefined);
        if (!caller.key && !caller.operator) return false;
        context.extra.caller = caller;
        return true;
      },
      context: (context) => context.extra.caller ?? { key: null, operator: false },
    }, this.websockets);
    this.disposeWebsockets = async () => {
      await cleanup.dispose();
    };
  }

  async start(): Promise<void> {
    await this.apollo.start();
  }

  middleware() {
    return async (context: Context, next: Next): Promise<void> => {
      if (context.path !== GRAPHQL_PATH) return await next();
      let body: unknown;
      if (context.method === 'POST') {
        const raw = await readBody(context.req, this.maxBodyBytes);
        try {
          body = raw.length ? JSON.parse(raw.toString('utf8')) : {};
        } catch (error) {
          throw new AppError('invalid_json', `request body is not valid JSON: ${(error as Error).message}`, { cause: error });
        }
      }
      const headers = new HeaderMap();
      for (const [name, value] of Object.entries(context.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      const result = await this.apollo.executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: context.method.toUpperCase(), headers, search: context.search, body },
        context: () => this.callerFrom(context.get('authorization') || undefined),
      });
      for (const [name, value] of result.headers) context.set(name, value);
      context.status = result.status ?? 200;
      if (result.body.kind === 'complete') {
        context.body = result.body.string;
        return;
      }
      let text = '';
      for await (const chunk of result.body.asyncIterator) text += chunk;
      context.body = text;
    };
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    await this.disposeWebsockets();
    this.websockets.close();
    await this.apollo.stop();
  }

  /** A workspace key, or the operator token (compared by hash, in constant time). */
  private async callerFrom(header: string | undefined): Promise<GraphQLContext> {
    const token = bearerToken(header);
    if (!token) return { key: null, operator: false };
    if (this.operatorTokenHash && sameHash(hashSecret(token), this.operatorTokenHash)) return { key: null, operator: true };
    return { key: await this.controlPlane.apiKeys.authenticate(token), operator: false };
  }
}

function formatGraphQLError(formatted: GraphQLFormattedError, error: unknown, logger: Logger): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  if (original instanceof AppError) {
    return { ...formatted, message: original.message, extensions: { code: ERROR_TABLE[original.code].graphql, param: original.param } };
  }
  // Apollo files every validation error under GRAPHQL_VALIDATION_FAILED; the query limits keep their own code.
  const limitCode = ((error as { originalError?: { extensions?: Record<string, unknown> } }).originalError?.extensions?.code);
  if (typeof limitCode === 'string' && limitCode.startsWith('QUERY_TOO_')) return { ...formatted, extensions: { code: limitCode } };
  if (formatted.extensions?.code && formatted.extensions.code !== 'INTERNAL_SERVER_ERROR') return formatted;
  logger.error({ err: original }, 'graphql resolver failed');
  return { message: 'internal error', locations: formatted.locations, path: formatted.path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}
