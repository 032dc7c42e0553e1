import type http from 'node:http';
import { ApolloServer, HeaderMap, type ApolloServerPlugin } from '@apollo/server';
import { GraphQLError } from 'graphql';
import { asAppError } from '../../control-plane/api/errors';
import { BatchFileLinks } from '../../control-plane/api/records';
import { hashSecret, sameHash } from '../../control-plane/api/startup';
import type { AdminPort } from '../../control-plane/api/admin';
import { DEFAULT_QUERY_LIMITS, queryLimitRules } from './query-limits';
import { DocumentScreen } from './document-screen';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { bearerToken } from '../http/bearer-token';
import { anonymousOperationsPlugin } from './anonymous-operations';
import { readGraphQLBody, type GraphQLLimits } from './graphql-limits';
import { buildGatewaySchema } from './build-schema';
import type { GraphQLContext } from './graphql-context';
import { formatGraphQLError, withHttpStatus } from './graphql-errors';
import { nulByteInVariables, nulByteRule } from './nul-byte-checks';
import { formatExecutionResult } from './websocket-operations';
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
import { MetricsHistoryResolver } from './resolvers/metrics-history.resolver';
import { RequestLogResolver } from './resolvers/request-log.resolver';
import { BudgetResolver } from './resolvers/budget.resolver';
import { ReplicaLogResolver } from './resolvers/replica-log.resolver';
import { PlaygroundResolver, type PlaygroundOptions } from './resolvers/playground.resolver';
import { AdapterResolver } from './resolvers/adapter.resolver';
import type { RequestGate } from '../http/request-gate';
import { limitDatabaseQueries, QuerySlots } from './database-cost';
import { operationBudgetPlugin } from './operation-budget';
import { SubscriptionHub } from './subscription-hub';
import { subscriptionRoutes } from './subscription-routes';
import { serveGraphQLWebSockets } from './graphql-websockets';

export const GRAPHQL_PATH = '/graphql';

/**
 * Apollo Server for queries and mutations (called from a Koa middleware on `/graphql`) and
 * graphql-ws for subscriptions on the same path and port. Both authenticate with a workspace key.
 */
export class GraphQLServer {
  private readonly apollo: ApolloServer<GraphQLContext>;
  private readonly websockets: { dispose(): Promise<void> };
  private readonly releaseOperation: (context: GraphQLContext) => void;
  /** Every subscription of this server and the one place their events are rendered. */
  readonly subscriptions: SubscriptionHub;
  /** Hashed once: each caller's token is hashed and compared to it in constant time. */
  private readonly operatorTokenHash: string | null;
  /** Documents over the query limits, refused before graphql-js validates them. */
  private readonly screen: DocumentScreen;

  constructor(
    private readonly admin: AdminPort, httpServer: http.Server, publicUrl: () => string, private readonly limits: GraphQLLimits, logger: Logger,
    private readonly gate: RequestGate, playground: PlaygroundOptions,
  ) {
    this.operatorTokenHash = admin.config.operatorToken ? hashSecret(admin.config.operatorToken) : null;
    const deployments = new DeploymentResolver(admin, publicUrl);
    const playgroundResolver = new PlaygroundResolver(admin, playground, logger.child({ component: 'playground' }));
    const batches = new BatchResolver(admin, new BatchFileLinks(admin.batches.files, admin.managedStore, admin.storageCredentials, {
      managedLinkTtlSeconds: admin.config.storage.outputUrlTtlSeconds, customerLinkTtlSeconds: admin.config.storage.customerOutputUrlTtlSeconds,
    }, logger.child({ component: 'graphql' })));
    const instances = new Map<unknown, unknown>([
      [CatalogResolver, new CatalogResolver(admin)],
      [ApiKeyResolver, new ApiKeyResolver(admin)],
      [DeploymentResolver, deployments],
      [StorageCredentialResolver, new StorageCredentialResolver(admin)],
      [RequestResolver, new RequestResolver(admin)],
      [WebhookResolver, new WebhookResolver(admin)],
      [CapacityResolver, new CapacityResolver(admin)],
      [BillingResolver, new BillingResolver(admin)],
      [WorkspaceResolver, new WorkspaceResolver(admin)],
      [SharingResolver, new SharingResolver(admin)],
      [ConsoleResolver, new ConsoleResolver(admin)],
      [BatchResolver, batches],
      [BudgetResolver, new BudgetResolver(admin)],
      [MetricsHistoryResolver, new MetricsHistoryResolver(admin)],
      [RequestLogResolver, new RequestLogResolver(admin)],
      [ReplicaLogResolver, new ReplicaLogResolver(admin, deployments)],
      [PlaygroundResolver, playgroundResolver],
      [AdapterResolver, new AdapterResolver(admin)],
    ]);
    const schema = buildGatewaySchema({ container: { get: (type) => instances.get(type) } });
    limitDatabaseQueries(schema);
    this.subscriptions = new SubscriptionHub(schema, subscriptionRoutes({
      ownDeployment: (caller, deploymentId) => deployments.checkOwnDeployment(caller, deploymentId),
      ownBatchDeployment: (caller, deploymentId) => batches.checkBatchUpdatedSubscription(caller, deploymentId),
    }, { playgroundChat: playgroundResolver.chatStream }), {
      events: admin.events, tenantQueries: admin.tenantQueries,
      format: (result) => formatExecutionResult(result, logger), databaseQueriesPerOperation: limits.databaseQueriesPerOperation,
      logger: logger.child({ component: 'subscriptions' }),
    });
    this.screen = new DocumentScreen(schema, { ...DEFAULT_QUERY_LIMITS, maxDatabaseCost: limits.maxDatabaseCost }, limits.maxTokens);
    const operationBudget = operationBudgetPlugin(schema, admin.budget, asGraphQLError);
    this.releaseOperation = (context) => operationBudget.release(context);

    this.apollo = new ApolloServer<GraphQLContext>({
      schema,
      introspection: true,
      // Apollo would otherwise handle SIGINT/SIGTERM itself and re-raise them, killing the
      // process before the server drains its agents and stops the database.
      stopOnTerminationSignals: false,
      validationRules: [...queryLimitRules({ maxDatabaseCost: limits.maxDatabaseCost }), nulByteRule],
      parseOptions: { maxTokens: limits.maxTokens },
      plugins: [nulBytesInVariablesPlugin, subscriptionsOverWebSocketPlugin, anonymousOperationsPlugin(asGraphQLError), operationBudget.plugin],
      // Errors never carry stack traces to clients, whatever NODE_ENV says (formatGraphQLError drops them too).
      includeStacktraceInErrorResponses: false,
      formatError: (formatted, error) => formatGraphQLError(formatted, error, logger),
    });
    this.websockets = serveGraphQLWebSockets({
      httpServer, path: GRAPHQL_PATH, schema, hub: this.subscriptions, admin, limits, logger,
      callerFrom: (authorization) => this.callerFrom(authorization), identified: (socket) => gate.identified(socket), screen: this.screen,
    });
  }

  async start(): Promise<void> {
    await this.apollo.start();
  }

  middleware() {
    return async (context: Context, next: Next): Promise<void> => {
      if (context.path !== GRAPHQL_PATH) return await next();
      // The caller is known from its header before a byte of the body is read: a request
      // without a key may only sign in, so its body is capped small and refused unread beyond.
      let caller: GraphQLContext | undefined;
      let lookupFailure: unknown;
      try {
        caller = await this.callerFrom(context.get('authorization') || undefined);
      } catch (error) {
        lookupFailure = error; // answered by the context below: 503 UNAVAILABLE, as on /v1
      }
      const hasKey = caller ? Boolean(caller.key || caller.operator) : true;
      // A key's request holds its share of the tenant budget, its body's memory included (the operator's holds none).
      const held = caller?.key ? this.gate.enter(context.req, context.res, caller.key) : undefined;
      const body = context.method === 'POST' ? await readGraphQLBody(context.req, hasKey, this.limits, held) : undefined;
      // Over its limits, refused before graphql-js validates it (document-screen.ts).
      const tooCostly = this.screen.refusal((body as { query?: unknown } | undefined)?.query ?? context.query.query);
      if (tooCostly) {
        context.status = 400;
        context.body = { errors: [{ message: tooCostly.message, locations: tooCostly.locations, extensions: { code: tooCostly.extensions.code } }] };
        return;
      }
      const headers = new HeaderMap();
      for (const [name, value] of Object.entries(context.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      // This operation's own context: its turns at the database, and what it holds until it ends.
      const operation: GraphQLContext | undefined = caller && {
        ...caller, clientAddress: context.req.socket.remoteAddress, database: new QuerySlots(this.limits.databaseQueriesPerOperation),
      };
      try {
        // Its queries are a tenant's: the tenant pool, with its statement timeout.
        const result = await this.admin.tenantQueries.run(async () => await this.apollo.executeHTTPGraphQLRequest({
          httpGraphQLRequest: { method: context.method.toUpperCase(), headers, search: context.search, body },
          context: async () => operation ?? asGraphQLError(lookupFailure),
        }));
        for (const [name, value] of result.headers) context.set(name, value);
        context.status = result.status ?? 200;
        if (result.body.kind === 'complete') {
          context.body = result.body.string;
          return;
        }
        let text = '';
        for await (const chunk of result.body.asyncIterator) text += chunk;
        context.body = text;
      } finally {
        if (operation) this.releaseOperation(operation);
      }
    };
  }

  async stop(): Promise<void> {
    await this.websockets.dispose();
    await this.apollo.stop();
  }

  /** A workspace key, or the operator token (compared by hash, in constant time). */
  private async callerFrom(header: string | undefined): Promise<GraphQLContext> {
    const token = bearerToken(header);
    if (!token) return { key: null, operator: false };
    if (this.operatorTokenHash && sameHash(hashSecret(token), this.operatorTokenHash)) return { key: null, operator: true };
    const key = await this.admin.apiKeys.authenticate(token);
    return { key, operator: false, unknownToken: key === null };
  }
}

/**
 * Apollo answers 500 for any error thrown while building the context (the caller's key is
 * looked up in PostgreSQL there): carry the AppError's status and code instead, so a database
 * outage is a 503 UNAVAILABLE with Retry-After, as on /v1.
 */
function asGraphQLError(error: unknown): never {
  throw withHttpStatus(asAppError(error));
}

/** A NUL in a variable is refused before anything runs (literals are refused by nulByteRule while validating). */
const nulBytesInVariablesPlugin: ApolloServerPlugin<GraphQLContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ document, request }) {
        const error = nulByteInVariables(document, request.operationName, request.variables);
        if (error) throw error;
      },
    };
  },
};

/**
 * Apollo runs a subscription sent over HTTP as a one-off query, whose resolvers then get no
 * event to read (a TypeError: INTERNAL_SERVER_ERROR). Subscriptions live on graphql-ws.
 */
const subscriptionsOverWebSocketPlugin: ApolloServerPlugin<GraphQLContext> = {
  async requestDidStart() {
    return {
      async didResolveOperation({ operation }) {
        if (operation?.operation !== 'subscription') return;
        throw new GraphQLError(`subscriptions are served over WebSocket (graphql-transport-ws) at ${GRAPHQL_PATH}, not over HTTP`, {
          extensions: { code: 'BAD_REQUEST', http: { status: 400 } },
        });
      },
    };
  },
};
