import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { AppError, quoteValue } from '../../../control-plane/api/errors';
import { type AuthenticatedKey, type Deployment, parseResponsesRequest, type ResponseScope, type InferencePort, type ResponsesRequest, type ResponsesService, type ResponseTurn, type RunSummary, servedEndpoints, SHARED_SCOPE, type TurnLimits, WORKSPACE_SCOPE } from '../../../control-plane/api/inference';
import type { BackgroundResponses } from '../../../control-plane/api/records';
import { readBody } from '../../http/read-body';
import type { RequestBudget } from '../../http/request-budget';
import type { RequestTrace } from '../../http/request-id';
import { rateLimitHeaders } from '../../http/rate-limit-headers';
import { traceparentHeader, workTraceOf } from '../../http/request-span';
import type { StreamLimits, TextRouteOptions } from '../http-text-sink';
import { ResponseSink } from './response-sink';
import { idOf, type RouteEndpoints } from '../route-endpoints';

const MAX_LIST_LIMIT = 100;
const DEFAULT_LIST_LIMIT = 20;

/**
 * `POST /v1/responses`, on the fast lane like chat. The work itself is the ResponsesService's:
 * the route reads and validates, hands over, and writes what comes back.
 */
export class ResponsesRoute {
  constructor(
    private readonly responses: InferencePort['responses'],
    private readonly background: Pick<BackgroundResponses, 'create' | 'options'>,
    private readonly options: TextRouteOptions & StreamLimits,
  ) {}

  async create(request: IncomingMessage, response: ServerResponse, deployment: Deployment, key: AuthenticatedKey, trace: RequestTrace, held: RequestBudget): Promise<RunSummary | void> {
    return await this.createFromBody(response, await readBody(request, this.options.maxBodyBytes, held), deployment, key, trace);
  }

  /** `create` with the body already read (the workspace base URL reads it to find the deployment). */
  async createFromBody(response: ServerResponse, body: Buffer, deployment: Deployment, key: AuthenticatedKey, trace: RequestTrace): Promise<RunSummary | void> {
    const parsed = this.parse(body);
    if (parsed.background) {
      // Admitted now (its refusals answer the create), run by the background runner: the create answers `queued` at once.
      const turn = await this.responses.begin(key, deployment, parsed, { ...this.limits(trace), deadlineUnixMs: Date.now() + this.background.options.timeoutMs });
      const object = await this.background.create(turn);
      const headers = rateLimitHeaders(turn.ticket.rateLimit, key.rpmLimit, key.tpdLimit);
      const answer = Buffer.from(JSON.stringify(object));
      if (trace.span) headers.push('traceparent', traceparentHeader(trace.span));
      response.writeHead(200, [...headers, 'x-request-id', trace.id, 'content-type', 'application/json', 'content-length', String(answer.length)]);
      response.end(answer);
      return;
    }
    return await this.run(response, key, trace, await this.responses.begin(key, deployment, parsed, this.limits(trace)));
  }

  /** `POST /shared/v1/responses`: a guest's turn on a shared model (`model: "shared/<model-id>"`), as `/shared/v1/chat/completions`. */
  async createShared(request: IncomingMessage, response: ServerResponse, key: AuthenticatedKey, trace: RequestTrace, held: RequestBudget, labelled: (label: string) => void): Promise<RunSummary> {
    const parsed = await this.read(request, held);
    if (parsed.background) {
      throw new AppError('invalid_request', 'background: guests\' responses on /shared/v1 run in the foreground only; send background: false', { param: 'background' });
    }
    return await this.run(response, key, trace, await this.responses.beginShared(key, parsed, labelled, this.limits(trace)));
  }

  private async read(request: IncomingMessage, held: RequestBudget): Promise<ResponsesRequest> {
    return this.parse(await readBody(request, this.options.maxBodyBytes, held));
  }

  private parse(body: Buffer): ResponsesRequest {
    const parsed = parseResponsesRequest(body);
    if (parsed.background && parsed.stream) {
      throw new AppError('invalid_request', 'stream: a background response is not streamed; poll GET /v1/responses/{id}, or send background: false', { param: 'stream' });
    }
    return parsed;
  }

  private limits(trace: RequestTrace): TurnLimits {
    return { deadlineUnixMs: Date.now() + this.options.requestTimeoutMs, streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints, trace: workTraceOf(trace.id, trace.span) };
  }

  private async run(response: ServerResponse, key: AuthenticatedKey, trace: RequestTrace, turn: ResponseTurn): Promise<RunSummary> {
    return await this.responses.run(turn, new ResponseSink(response, { turn, service: this.responses, key, trace, requestTimeoutMs: this.options.requestTimeoutMs, limits: this.options }));
  }

}

/** The stored responses' `GET`, `DELETE` and `GET …/input_items` (on Koa). */
export class StoredResponsesRoute {
  constructor(private readonly responses: Pick<ResponsesService, 'retrieve' | 'inputItems' | 'delete'>, private readonly background: Pick<BackgroundResponses, 'cancel' | 'beforeDelete'>) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'responses.retrieve': (context, deployment, key, param) => this.retrieve(context, deployment, key, idOf(param)),
        'responses.delete': (context, deployment, key, param) => this.delete(context, deployment, key, idOf(param)),
        'responses.input_items': (context, deployment, key, param) => this.inputItems(context, deployment, key, idOf(param)),
        'responses.cancel': (context, deployment, key, param) => this.cancel(context, deployment, key, idOf(param)),
      },
      records: {
        'responses.retrieve': (context, key, param) => this.retrieve(context, 'workspace', key, idOf(param)),
        'responses.delete': (context, key, param) => this.delete(context, 'workspace', key, idOf(param)),
        'responses.input_items': (context, key, param) => this.inputItems(context, 'workspace', key, idOf(param)),
        'responses.cancel': (context, key, param) => this.cancel(context, 'workspace', key, idOf(param)),
      },
    };
  }

  /** `POST /responses/{id}/cancel` (background responses). */
  async cancel(context: Context, at: ResponsesAt, key: AuthenticatedKey, id: string): Promise<void> {
    context.body = await this.background.cancel(scopeOf(at, key), id);
  }

  async retrieve(context: Context, at: ResponsesAt, key: AuthenticatedKey, id: string): Promise<void> {
    if (context.query.stream === 'true') throw new AppError('invalid_request', 'stream: replaying a stored response as events is not supported', { param: 'stream' });
    context.body = await this.responses.retrieve(scopeOf(at, key), id);
  }

  async delete(context: Context, at: ResponsesAt, key: AuthenticatedKey, id: string): Promise<void> {
    const scope = scopeOf(at, key);
    // Guests' responses are never background ones (createShared refuses them).
    if (at !== 'shared') await this.background.beforeDelete(scope, id);
    context.body = await this.responses.delete(scope, id);
  }

  async inputItems(context: Context, at: ResponsesAt, key: AuthenticatedKey, id: string): Promise<void> {
    const { limit, order, after } = context.query;
    if (limit !== undefined && (typeof limit !== 'string' || !/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_LIST_LIMIT)) {
      throw new AppError('invalid_request', `limit must be an integer from 1 to ${MAX_LIST_LIMIT}, got ${quoteValue(limit)}`, { param: 'limit' });
    }
    if (order !== undefined && order !== 'asc' && order !== 'desc') throw new AppError('invalid_request', `order must be asc or desc, got ${quoteValue(order)}`, { param: 'order' });
    if (after !== undefined && typeof after !== 'string') throw new AppError('invalid_request', 'after may be given once', { param: 'after' });
    context.body = await this.responses.inputItems(scopeOf(at, key), id, {
      limit: limit === undefined ? DEFAULT_LIST_LIMIT : Number(limit), order: order ?? 'desc', after: after ?? null,
    });
  }
}

/**
 * Where a stored response is asked for: on a deployment's URL (its responses), on the workspace
 * base URL `/v1` (any of the workspace's own deployments'), or on `/shared/v1` (the guest's, on any shared model).
 */
export type ResponsesAt = Deployment | 'workspace' | 'shared';

function scopeOf(at: ResponsesAt, key: AuthenticatedKey): ResponseScope {
  const deploymentId = at === 'workspace' ? WORKSPACE_SCOPE : at === 'shared' ? SHARED_SCOPE : at.id;
  return { workspaceId: key.workspaceId, deploymentId };
}
