import { execute, type DocumentNode, type ExecutionResult, type FormattedExecutionResult, type GraphQLSchema } from 'graphql';
import type { Logger } from 'pino';
import type { WebSocket } from 'ws';
import type { ControlPlaneEvents } from '../../control-plane/api/admin';
import { AppError } from '../../control-plane/api/errors';
import type { BudgetLease, TenantQueries } from '../../control-plane/api/inference';
import { QuerySlots } from './database-cost';
import type { GraphQLContext } from './graphql-context';
import type { EventRoute, StreamRoute, SubscriptionRoute } from './subscription-routes';

/** A subscription operation as its socket sent it. */
export interface SocketOperation {
  readonly socket: WebSocket;
  /** The graphql-ws operation id. */
  readonly id: string;
  readonly document: DocumentNode;
  readonly query: string;
  readonly operationName?: string | null;
  readonly variables?: Record<string, unknown> | null;
  /**
   * Its hold on the `subscriptions` budget, taken when its message arrived, before it was parsed
   * (graphql-websockets.ts); the subscription gives it back when it ends.
   */
  readonly lease: BudgetLease;
}

export interface SubscriptionHubOptions {
  events: ControlPlaneEvents;
  tenantQueries: TenantQueries;
  /** An execution result as the client sees it (codes from the error table, no stack traces). */
  format(result: ExecutionResult): FormattedExecutionResult;
  /** QuerySlots of each rendering (database-cost.ts). */
  databaseQueriesPerOperation: number;
  logger: Logger;
}

const NEXT_END = Buffer.from('}');

/** Sockets corked in this tick. */
const corked = new Set<WebSocket>();

/**
 * The `next` messages an event sends to the subscriptions of one socket leave in one write
 * (ws corks each frame alone, and each ws.send is otherwise a write of its own): one event to
 * 20,000 subscribers on 200 sockets kept the event loop 98-249 ms, corked 51-125 ms. `_socket`
 * is ws's own field (ws 8), not its public API: without it nothing is corked.
 */
function corkUntilNextTick(socket: WebSocket): void {
  const transport = (socket as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
  if (!transport || corked.has(socket)) return;
  corked.add(socket);
  transport.cork();
  process.nextTick(() => {
    corked.delete(socket);
    transport.uncork();
  });
}

/**
 * Every graphql-ws subscription of this server, indexed by what it listens to, and the one
 * place their events are rendered. graphql-ws used to run each subscription on its own: each
 * of N subscribers of a deployment ran the event's filter and resolvers and serialized its own
 * copy, and each `replicaLoad` heartbeat went through every subscription on the server (at
 * 40,000 subscriptions other tenants' chat took 16.8 s, issue 33). Here an event touches only
 * the subscriptions of its channel (subscription-routes.ts), is executed once for each distinct
 * operation among them (same workspace, document, operation name and variables), serialized
 * once, and the same bytes go to every subscriber with only the operation id spliced in.
 *
 * The schema's subscription fields resolve `subscribe` here: graphql-js's
 * createSourceEventStream reads the operation's arguments and calls `listen`, which checks the
 * caller, keeps the operation's hold on the `subscriptions` budget (per socket, key, workspace and
 * server; taken before the message was parsed) and returns an iterator that yields nothing: events are written to the socket directly, and the iterator
 * only tells graphql-ws when the subscription ends. Ending it (the client's `complete`, the
 * socket closing, the server stopping) gives the hold back, once.
 */
export class SubscriptionHub {
  private readonly channels = new Map<string, Map<string, RenderGroup>>();
  private readonly operations = new WeakMap<GraphQLContext, SocketOperation>();
  private readonly subscribers = new Set<Subscriber>();
  private readonly streams = new Set<RenderedStream>();
  private readonly stopListening: Array<() => void> = [];
  private rendered = 0;

  constructor(private readonly schema: GraphQLSchema, routes: Readonly<Record<string, SubscriptionRoute>>, private readonly options: SubscriptionHubOptions) {
    const fields = schema.getSubscriptionType()?.getFields() ?? {};
    for (const name of Object.keys(fields)) {
      const route = routes[name];
      // A subscription field without a route would be accepted and never fire.
      if (!route) throw new Error(`subscription '${name}' has no route (subscription-routes.ts)`);
      if ('stream' in route) {
        fields[name].subscribe = (_source, args, context: GraphQLContext) => this.stream(route, args, context);
        continue;
      }
      fields[name].subscribe = (_source, args, context: GraphQLContext) => this.listen(name, route, args, context);
      const publish = (event: unknown) => this.publish(name, route.channelsOf(event as never), event);
      options.events.on(route.event, publish as never);
      this.stopListening.push(() => options.events.off(route.event, publish as never));
    }
  }

  /** Executions of a subscription's selection for an event so far (one per event and distinct operation). */
  get renders(): number {
    return this.rendered;
  }

  /** Subscriptions open now. */
  get size(): number {
    return this.subscribers.size + this.streams.size;
  }

  /** `context` is the context of `operation`, which its subscription's events are written to. */
  bind(context: GraphQLContext, operation: SocketOperation): void {
    this.operations.set(context, operation);
  }

  /** Ends every subscription (the server stops): each gives its hold back. */
  stop(): void {
    for (const stop of this.stopListening.splice(0)) stop();
    for (const subscriber of [...this.subscribers]) subscriber.end();
    for (const stream of [...this.streams]) void stream.return();
  }

  /**
   * A stream route's subscription: its work's items, each executed with the operation's own
   * selection (graphql-ws sends what this yields as it is), its hold on the `subscriptions`
   * budget given back when it ends, however.
   */
  private async stream(route: StreamRoute, args: Record<string, unknown>, context: GraphQLContext): Promise<RenderedStream> {
    const operation = this.operations.get(context);
    if (!operation) throw new AppError('invalid_request', 'subscriptions are served over WebSocket (graphql-transport-ws) at /graphql');
    const source = await route.stream(args, context);
    const { schema, options } = this;
    const render = async (item: unknown) => await options.tenantQueries.run(async () => await execute({
      schema, document: operation.document, rootValue: item, operationName: operation.operationName ?? undefined, variableValues: operation.variables ?? undefined,
      contextValue: { ...context, database: new QuerySlots(options.databaseQueriesPerOperation) },
    }));
    const stream = new RenderedStream(source, render, () => {
      this.streams.delete(stream);
      operation.lease.release();
    });
    this.streams.add(stream);
    return stream;
  }

  private async listen(field: string, route: EventRoute, args: Record<string, unknown>, context: GraphQLContext): Promise<Subscriber> {
    const operation = this.operations.get(context);
    if (!operation) throw new AppError('invalid_request', 'subscriptions are served over WebSocket (graphql-transport-ws) at /graphql');
    const channel = await route.channelFor(args, context);
    const workspaceId = context.key!.workspaceId;
    const lease = operation.lease;
    const channelKey = `${field}\n${channel}`;
    let groups = this.channels.get(channelKey);
    if (!groups) this.channels.set(channelKey, (groups = new Map()));
    // What makes two subscriptions render alike: the selection, its variables, and the workspace
    // their resolvers read as (a payload's resolvers see only the workspace, never the key).
    const renderKey = JSON.stringify([workspaceId, operation.query, operation.operationName ?? null, operation.variables ?? null]);
    let group = groups.get(renderKey);
    if (!group) {
      group = new RenderGroup(operation, { key: context.key, operator: false }, (event) => this.render(group!, event), this.options.logger);
      groups.set(renderKey, group);
    }
    const subscriber = new Subscriber(operation.socket, operation.id, lease, () => {
      this.subscribers.delete(subscriber);
      group!.members.delete(subscriber);
      if (group!.members.size > 0) return;
      groups!.delete(renderKey);
      if (groups!.size === 0) this.channels.delete(channelKey);
    });
    group.members.add(subscriber);
    this.subscribers.add(subscriber);
    return subscriber;
  }

  private publish(field: string, channels: readonly string[], event: unknown): void {
    for (const channel of channels) {
      const groups = this.channels.get(`${field}\n${channel}`);
      if (!groups) continue;
      for (const group of groups.values()) group.enqueue(event);
    }
  }

  /** The event as the `next` payload of `group`'s operation, serialized. */
  private async render(group: RenderGroup, event: unknown): Promise<Buffer> {
    this.rendered++;
    const { schema, options } = this;
    const result = await options.tenantQueries.run(async () => await execute({
      schema, document: group.document, rootValue: event, operationName: group.operationName, variableValues: group.variables,
      contextValue: { ...group.context, database: new QuerySlots(options.databaseQueriesPerOperation) },
    }));
    return Buffer.from(JSON.stringify(options.format(result)));
  }
}

/** The subscriptions that render an event alike, and the order their events go out in. */
class RenderGroup {
  readonly members = new Set<Subscriber>();
  readonly document: DocumentNode;
  readonly operationName: string | undefined;
  readonly variables: Record<string, unknown> | undefined;
  private tail: Promise<void> = Promise.resolve();

  constructor(operation: SocketOperation, readonly context: GraphQLContext, private readonly render: (event: unknown) => Promise<Buffer>, private readonly logger: Logger) {
    this.document = operation.document;
    this.operationName = operation.operationName ?? undefined;
    this.variables = operation.variables ?? undefined;
  }

  /** Renders `event` once its earlier events went out (a resolver may read the database), then sends it to every member. */
  enqueue(event: unknown): void {
    this.tail = this.tail.then(async () => {
      if (this.members.size === 0) return;
      let payload: Buffer;
      try {
        payload = await this.render(event);
      } catch (error) {
        this.logger.error({ err: error }, 'rendering a subscription event failed');
        return;
      }
      for (const member of this.members) member.send(payload);
    });
  }
}

/**
 * One subscription, as graphql-ws sees it: an async iterator that yields nothing and ends when
 * the subscription does (`return`: the client's `complete` or the socket closing). Its events
 * are written to the socket by its group.
 */
class Subscriber implements AsyncIterableIterator<never> {
  private readonly prefix: Buffer;
  private ended = false;
  private wake: (() => void) | null = null;

  constructor(private readonly socket: WebSocket, id: string, private readonly lease: BudgetLease, private readonly onEnd: () => void) {
    // graphql-ws's `next` message, `{"id":…,"type":"next","payload":…}`, with the payload bytes left out.
    this.prefix = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
  }

  send(payload: Buffer): void {
    if (this.ended || this.socket.readyState !== this.socket.OPEN) return;
    corkUntilNextTick(this.socket);
    this.socket.send(Buffer.concat([this.prefix, payload, NEXT_END]), { binary: false });
  }

  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.lease.release();
    this.onEnd();
    this.wake?.();
  }

  next(): Promise<IteratorResult<never>> {
    if (this.ended) return Promise.resolve({ done: true, value: undefined });
    return new Promise((resolve) => {
      this.wake = () => resolve({ done: true, value: undefined });
    });
  }

  return(): Promise<IteratorResult<never>> {
    this.end();
    return Promise.resolve({ done: true, value: undefined });
  }

  throw(): Promise<IteratorResult<never>> {
    return this.return();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}

/** A stream route's items as execution results; `onEnd` runs once, when it ends (done, thrown, or returned). */
class RenderedStream implements AsyncIterableIterator<ExecutionResult> {
  private ended = false;

  constructor(private readonly source: AsyncIterator<unknown>, private readonly render: (item: unknown) => Promise<ExecutionResult>, private readonly onEnd: () => void) {}

  async next(): Promise<IteratorResult<ExecutionResult>> {
    if (this.ended) return { done: true, value: undefined };
    let step: IteratorResult<unknown>;
    try {
      step = await this.source.next();
    } catch (error) {
      this.end();
      throw error;
    }
    if (step.done) {
      this.end();
      return { done: true, value: undefined };
    }
    return { done: false, value: await this.render(step.value) };
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    if (!this.ended) {
      this.end();
      await this.source.return?.();
    }
    return { done: true, value: undefined };
  }

  async throw(): Promise<IteratorResult<ExecutionResult>> {
    return await this.return();
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onEnd();
  }
}
