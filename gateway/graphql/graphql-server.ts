import type http from 'node:http';
import { ApolloServer, HeaderMap, type ApolloServerPlugin } from '@apollo/server';
import { createPubSub } from '@graphql-yoga/subscription';
import { GraphQLError, specifiedRules } from 'graphql';
import { hashSecret, sameHash } from '../../control-plane/secrets';
import { queryLimitRules } from './query-limits';
import { makeServer } from 'graphql-ws';
import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import type { PubSub } from 'type-graphql';
import { WebSocketServer } from 'ws';
import type { ControlPlane } from '../../control-plane/main';
import { bearerToken } from '../http/bearer-token';
import { anonymousOperationsPlugin } from './anonymous-operations';
import { readGraphQLBody, type GraphQLLimits } from './graphql-limits';
import { SocketSessions } from './socket-sessions';
import { serveOverWebSocket, type SocketExtra } from './websocket-transport';
import { buildGatewaySchema } from './build-schema';
import type { GraphQLContext } from './graphql-context';
import { formatGraphQLError, withHttpStatus } from './graphql-errors';
import { asAppError } from '../../control-plane/database/database-unavailable';
import { ERROR_TABLE } from '../errors/error-table';
import { nulByteInVariables, nulByteRule } from './nul-byte-checks';
import { websocketOperations } from './websocket-operations';
import { ApiKeyResolver } from './resolvers/api-key.resolver';
import { BillingResolver } from './resolvers/billing.resolver';
import { CapacityResolver } from './resolvers/capacity.resolver';
import { CatalogResolver } from './resolvers/catalog.resolver';
import { DEPLOYMENT_UPDATED, DeploymentResolver, REPLICA_LOAD } from './resolvers/deployment.resolver';
import { REQUEST_UPDATED, RequestResolver } from './resolvers/request.resolver';
import { StorageCredentialResolver } from './resolvers/storage-credential.resolver';
import { WEBHOOK_ATTEMPT_LOGGED, WebhookResolver } from './resolvers/webhook.resolver';
import { WorkspaceResolver } from './resolvers/workspace.resolver';
import { SHARED_MODEL_UPDATED, SharingResolver } from './resolvers/sharing.resolver';
import { ConsoleResolver } from './resolvers/console.resolver';
import { BATCH_UPDATED, BatchResolver } from './resolvers/batch.resolver';
import { BatchFileLinks } from '../../control-plane/batches/batch-file-links';
import { BudgetResolver } from './resolvers/budget.resolver';
import type { RequestGate } from '../http/request-gate';

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
  private readonly sessions: SocketSessions;
  /** Hashed once: each caller's token is hashed and compared to it in constant time. */
  private readonly operatorTokenHash: string | null;

  constructor(
    private readonly controlPlane: ControlPlane, httpServer: http.Server, publicUrl: () => string, private readonly limits: GraphQLLimits, logger: Logger,
    private readonly gate: RequestGate,
  ) {
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
      [WorkspaceResolver, new WorkspaceResolver(controlPlane)],
      [SharingResolver, new SharingResolver(controlPlane)],
      [ConsoleResolver, new ConsoleResolver(controlPlane)],
      [BatchResolver, new BatchResolver(controlPlane, new BatchFileLinks(controlPlane.batches.files, controlPlane.managedStore, controlPlane.storageCredentials, {
        managedLinkTtlSeconds: controlPlane.config.storage.outputUrlTtlSeconds, customerLinkTtlSeconds: controlPlane.config.storage.customerOutputUrlTtlSeconds,
      }, logger.child({ component: 'graphql' })))],
      [BudgetResolver, new BudgetResolver(controlPlane)],
    ]);
    const schema = buildGatewaySchema({ container: { get: (type) => instances.get(type) }, pubSub: pubSub as unknown as PubSub });
    const forward = (deployment: unknown) => pubSub.publish(DEPLOYMENT_UPDATED, deployment as never);
    const forwardRequest = (record: unknown) => pubSub.publish(REQUEST_UPDATED, record as never);
    const forwardAttempt = (attempt: unknown) => pubSub.publish(WEBHOOK_ATTEMPT_LOGGED, attempt as never);
    const forwardLoad = (load: unknown) => pubSub.publish(REPLICA_LOAD, load as never);
    const forwardSharedModel = (model: unknown) => pubSub.publish(SHARED_MODEL_UPDATED, model as never);
    const forwardBatch = (batch: unknown) => pubSub.publish(BATCH_UPDATED, batch as never);
    controlPlane.events.on('deploymentUpdated', forward);
    controlPlane.events.on('requestUpdated', forwardRequest);
    controlPlane.events.on('webhookAttemptLogged', forwardAttempt);
    controlPlane.events.on('replicaLoad', forwardLoad);
    controlPlane.events.on('sharedModelUpdated', forwardSharedModel);
    controlPlane.events.on('batchUpdated', forwardBatch);
    this.unsubscribe = () => {
      controlPlane.events.off('deploymentUpdated', forward);
      controlPlane.events.off('requestUpdated', forwardRequest);
      controlPlane.events.off('webhookAttemptLogged', forwardAttempt);
      controlPlane.events.off('replicaLoad', forwardLoad);
      controlPlane.events.off('sharedModelUpdated', forwardSharedModel);
      controlPlane.events.off('batchUpdated', forwardBatch);
    };

    this.apollo = new ApolloServer<GraphQLContext>({
      schema,
      introspection: true,
      // Apollo would otherwise handle SIGINT/SIGTERM itself and re-raise them, killing the
      // process before the server drains its agents and stops the database.
      stopOnTerminationSignals: false,
      validationRules: [...queryLimitRules(), nulByteRule],
      parseOptions: { maxTokens: limits.maxTokens },
      plugins: [nulBytesInVariablesPlugin, subscriptionsOverWebSocketPlugin, anonymousOperationsPlugin(asGraphQLError)],
      // Errors never carry stack traces to clients, whatever NODE_ENV says (formatGraphQLError drops them too).
      includeStacktraceInErrorResponses: false,
      formatError: (formatted, error) => formatGraphQLError(formatted, error, logger),
    });
    // maxPayload: ws refuses a larger frame (1009) while reading it, instead of buffering up to its 100 MiB default.
    this.websockets = new WebSocketServer({ server: httpServer, path: GRAPHQL_PATH, maxPayload: limits.maxBodyBytes });
    this.sessions = new SocketSessions((authorization) => this.callerFrom(authorization), controlPlane.apiKeys, logger);
    const operations = websocketOperations([...specifiedRules, ...queryLimitRules(), nulByteRule], limits.maxTokens, logger);
    const server = makeServer<Record<string, unknown>, SocketExtra>({
      schema,
      connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
      onConnect: async (context) => {
        const header = context.connectionParams?.authorization ?? context.connectionParams?.Authorization;
        const authorization = typeof header === 'string' ? header : undefined;
        const caller = await this.callerFrom(authorization);
        if (!caller.key && !caller.operator) return false;
        this.sessions.add(context.extra.socket, authorization, caller);
        context.extra.acknowledged = true;
        return true;
      },
      // Each operation runs as the key is now, not as it was when the socket opened.
      onSubscribe: async (context, _id, payload) => {
        const caller = await this.sessions.current(context.extra.socket);
        if (!caller) return [revokedError()];
        return operations.prepare(schema, payload, { ...caller, clientAddress: context.extra.request.socket.remoteAddress });
      },
      onNext: (_context, _id, _payload, _args, result) => operations.formatResult(result),
      onError: (_context, _id, _payload, errors) => operations.formatErrors(errors),
    });
    const transport = serveOverWebSocket(this.websockets, server, { preInitMaxBytes: limits.anonymousMaxBodyBytes, keepAliveMs: limits.keepAliveMs }, logger);
    this.disposeWebsockets = async () => {
      this.sessions.stop();
      await transport.dispose();
    };
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
      const headers = new HeaderMap();
      for (const [name, value] of Object.entries(context.headers)) {
        if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
      }
      const result = await this.apollo.executeHTTPGraphQLRequest({
        httpGraphQLRequest: { method: context.method.toUpperCase(), headers, search: context.search, body },
        context: async () => (caller ? { ...caller, clientAddress: context.req.socket.remoteAddress } : asGraphQLError(lookupFailure)),
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
    await this.apollo.stop();
  }

  /** A workspace key, or the operator token (compared by hash, in constant time). */
  private async callerFrom(header: string | undefined): Promise<GraphQLContext> {
    const token = bearerToken(header);
    if (!token) return { key: null, operator: false };
    if (this.operatorTokenHash && sameHash(hashSecret(token), this.operatorTokenHash)) return { key: null, operator: true };
    const key = await this.controlPlane.apiKeys.authenticate(token);
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

function revokedError(): GraphQLError {
  return new GraphQLError('the API key of this connection was revoked or replaced', { extensions: { code: ERROR_TABLE.invalid_api_key.graphql } });
}
