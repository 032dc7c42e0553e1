import type http from 'node:http';
import type net from 'node:net';
import {
  createSourceEventStream, execute, getOperationAST, GraphQLError, specifiedRules,
  type ExecutionArgs, type ExecutionResult, type GraphQLSchema,
} from 'graphql';
import { makeServer } from 'graphql-ws';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { AppError } from '../../control-plane/api/errors';
import type { BudgetLease } from '../../control-plane/api/inference';
import type { AdminPort } from '../../control-plane/api/admin';
import { GRAPHQL_CODES } from './graphql-codes';
import { QuerySlots } from './database-cost';
import type { GraphQLContext } from './graphql-context';
import type { GraphQLLimits } from './graphql-limits';
import { nulByteRule } from './nul-byte-checks';
import { holdOperation } from './operation-budget';
import { databaseCostOfOperation, queryLimitRules } from './query-limits';
import { SocketSessions } from './socket-sessions';
import type { DocumentScreen } from './document-screen';
import type { SubscriptionHub } from './subscription-hub';
import { websocketOperations } from './websocket-operations';
import { serveOverWebSocket, type SocketExtra } from './websocket-transport';

/** Operations the budget may refuse on one socket before it is closed (4429): a client that reads its refusals stops well before. */
const MAX_REFUSED_OPERATIONS = 20;

/** Close codes of a `connection_init` the `sockets` budget refuses (docs/tenant-budget.md). */
export const SOCKET_CLOSE_CODES = {
  /** The key's share is used up: retry when one of its sockets closes. */
  keyBudget: 4429,
  /** The server's share is used up (RFC 6455 "Try Again Later"). */
  serverBudget: 1013,
  /** The key's workspace may hold none (the operator set its limit to 0). */
  noneAllowed: 4403,
} as const;

/**
 * graphql-ws on the HTTP server's `/graphql` path: subscriptions (served by the hub), and
 * queries and mutations sent on a socket, which hold the budget and run as tenant queries as
 * they do over HTTP. Each accepted `connection_init` holds one of its key's `sockets` until the
 * socket closes; over the budget the connection is closed with a code and a reason naming it.
 */
export function serveGraphQLWebSockets(options: {
  httpServer: http.Server;
  path: string;
  schema: GraphQLSchema;
  hub: SubscriptionHub;
  admin: Pick<AdminPort, 'budget' | 'apiKeys' | 'tenantQueries'>;
  limits: GraphQLLimits;
  callerFrom(authorization: string | undefined): Promise<GraphQLContext>;
  /** A socket accepted with a key stops counting as its address's anonymous connection (connection-budget.ts). */
  identified(socket: net.Socket): void;
  /** Documents over the query limits, refused before they are validated. */
  screen: Pick<DocumentScreen, 'refusal'>;
  logger: Logger;
}): { dispose(): Promise<void> } {
  const { schema, hub, admin, limits, logger } = options;
  const { budget, tenantQueries } = admin;
  // maxPayload: ws refuses a larger frame (1009) while reading it, instead of buffering up to its 100 MiB default.
  const websockets = new WebSocketServer({ server: options.httpServer, path: options.path, maxPayload: limits.maxBodyBytes });
  const sessions = new SocketSessions(options.callerFrom, admin.apiKeys, logger);
  const operations = websocketOperations([...specifiedRules, ...queryLimitRules({ maxDatabaseCost: limits.maxDatabaseCost }), nulByteRule], limits.maxTokens, logger);
  const held = new OperationHolds();
  const refusals = new WeakMap<WebSocket, number>();
  /**
   * A refusal answered on the socket; a socket refused MAX_REFUSED_OPERATIONS times is closed
   * (4429): a client that ignores the refusals and keeps sending would otherwise cost a message
   * parse and an answer per operation (40,000 subscribes sent at once, each refused, held the
   * event loop 3.5 s).
   */
  const refusedOn = (socket: WebSocket, refusal: AppError): GraphQLError[] => {
    const count = (refusals.get(socket) ?? 0) + 1;
    refusals.set(socket, count);
    if (count === MAX_REFUSED_OPERATIONS) {
      socket.close(SOCKET_CLOSE_CODES.keyBudget, closeReason(`${count} operations refused by the budget on this connection: ${refusal.message}`));
      // Nothing more is read from it (ws would go on parsing the frames already queued, each a
      // few microseconds: 36,000 of them still held the loop); the close handshake gets a second.
      socket.pause();
      setTimeout(() => socket.terminate(), 1_000).unref();
    }
    return [refused(refusal)];
  };

  /** A query or mutation sent on a socket: held, run as a tenant's queries, given back. */
  const executeHeld = async (args: ExecutionArgs): Promise<ExecutionResult> => {
    const hold = holdOperation(budget, args.contextValue as GraphQLContext, databaseCostOfOperation(schema, args.document, args.operationName));
    if (hold instanceof AppError) return { errors: [new GraphQLError(hold.message, { originalError: hold })] };
    try {
      return await tenantQueries.run(async () => await execute(args));
    } finally {
      hold.release();
    }
  };

  const server = makeServer<Record<string, unknown>, SocketExtra>({
    schema,
    connectionInitWaitTimeout: limits.connectionInitTimeoutMs,
    onConnect: async (context) => {
      const header = context.connectionParams?.authorization ?? context.connectionParams?.Authorization;
      const authorization = typeof header === 'string' ? header : undefined;
      const caller = await options.callerFrom(authorization);
      if (!caller.key && !caller.operator) return false;
      const socket = context.extra.socket;
      // Closed while its key was looked up: it will emit no `close` to give a hold back.
      if (socket.readyState !== socket.OPEN) return false;
      const lease = budget.take('sockets', { keyId: caller.key?.id ?? null, workspaceId: caller.key?.workspaceId ?? null });
      if (lease instanceof AppError) {
        refuseSocket(socket, lease);
        return false;
      }
      sessions.add(socket, authorization, caller, lease);
      if (caller.key) options.identified(context.extra.request.socket);
      context.extra.acknowledged = true;
      return true;
    },
    // Each operation runs as the key is now, not as it was when the socket opened.
    onSubscribe: async (context, id, payload) => {
      const socket = context.extra.socket;
      const holder = sessions.holderOf(socket);
      // Held before anything is parsed, so that a refused operation costs no parse, validation
      // or lookup: 40,000 subscribe messages sent at once were each parsed, validated and their
      // deployment looked up before the budget refused them (12 s of event loop, 1.4 GB). While
      // it is prepared, a document that may be a subscription holds one of `subscriptions` (kept
      // if it is one), any other one of `graphql_operations` (a query or mutation then holds its
      // own while it runs: executeHeld), as over HTTP.
      const pending = mayBeSubscription(payload.query) ? budget.take('subscriptions', { ...holder, socket }) : budget.take('graphql_operations', holder);
      if (pending instanceof AppError) return refusedOn(socket, pending);
      const tooCostly = options.screen.refusal(payload.query);
      if (tooCostly) {
        pending.release();
        return [tooCostly];
      }
      let kept = false;
      try {
        const caller = await sessions.current(socket);
        if (!caller) return [revokedError()];
        const prepared = operations.prepare(schema, payload, {
          ...caller, clientAddress: context.extra.request.socket.remoteAddress, database: new QuerySlots(limits.databaseQueriesPerOperation),
        });
        if (Array.isArray(prepared)) return prepared;
        const args = prepared as ExecutionArgs;
        if (getOperationAST(args.document, args.operationName)?.operation !== 'subscription') return args;
        // A subscription written without the keyword does not exist: one is only ever held as such.
        if (!mayBeSubscription(payload.query)) return [refused(new AppError('invalid_request', 'a subscription operation starts with the keyword subscription'))];
        held.add(socket, id, pending);
        hub.bind(args.contextValue as GraphQLContext, {
          socket, id, document: args.document, query: payload.query, operationName: payload.operationName, variables: payload.variables, lease: pending,
        });
        kept = true;
        return args;
      } finally {
        if (!kept) pending.release();
      }
    },
    // A subscription's hold goes back when it completes, however (its hub gives it back too, once).
    onComplete: (context, id) => held.end(context.extra.socket, id),
    execute: executeHeld,
    // createSourceEventStream calls the field's `subscribe`, which the hub set (subscription-hub.ts).
    subscribe: (args) => tenantQueries.run(async () => await createSourceEventStream(args) as ExecutionResult | AsyncIterable<ExecutionResult>),
    onNext: (_context, _id, _payload, _args, result) => operations.formatResult(result),
    onError: (_context, _id, _payload, errors) => operations.formatErrors(errors),
  });
  const transport = serveOverWebSocket(websockets, server, { preInitMaxBytes: limits.anonymousMaxBodyBytes, keepAliveMs: limits.keepAliveMs }, logger);
  return {
    async dispose() {
      sessions.stop();
      await transport.dispose();
      hub.stop();
    },
  };
}

/**
 * What each graphql-ws subscription of a socket holds of the `subscriptions` budget, by
 * operation id, until it ends: completed by the client or the server, or the socket closed.
 */
class OperationHolds {
  private readonly bySocket = new Map<WebSocket, Map<string, BudgetLease>>();

  add(socket: WebSocket, id: string, lease: BudgetLease): void {
    let leases = this.bySocket.get(socket);
    if (!leases) {
      this.bySocket.set(socket, (leases = new Map()));
      socket.once('close', () => {
        for (const each of leases!.values()) each.release();
        this.bySocket.delete(socket);
      });
    }
    leases.set(id, lease);
  }

  end(socket: WebSocket, id: string): void {
    const leases = this.bySocket.get(socket);
    leases?.get(id)?.release();
    leases?.delete(id);
  }
}

/** Closes a socket the `sockets` budget refused, with its code and a reason that fits a close frame (123 bytes). */
function refuseSocket(socket: WebSocket, refusal: AppError): void {
  const code = refusal.code === 'server_busy' ? SOCKET_CLOSE_CODES.serverBudget
    : refusal.code === 'permission_denied' ? SOCKET_CLOSE_CODES.noneAllowed : SOCKET_CLOSE_CODES.keyBudget;
  socket.close(code, closeReason(refusal.message));
}

function closeReason(message: string): string {
  const reason = message.split(';')[0];
  return Buffer.byteLength(reason) <= 123 ? reason : `${Buffer.from(reason).subarray(0, 120).toString()}...`;
}

/**
 * Whether a GraphQL document may hold a subscription, from its text alone: a subscription
 * operation starts with the keyword `subscription`, so text without that word holds none. A
 * false "maybe" (a field or string of that name) only makes a query wait in the subscriptions'
 * budget while it is prepared.
 */
function mayBeSubscription(query: unknown): boolean {
  return typeof query === 'string' && query.includes('subscription');
}

function refused(refusal: AppError): GraphQLError {
  return new GraphQLError(refusal.message, { originalError: refusal });
}

function revokedError(): GraphQLError {
  return new GraphQLError('the API key of this connection was revoked or replaced', { extensions: { code: GRAPHQL_CODES.invalid_api_key } });
}
