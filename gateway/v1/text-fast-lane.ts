import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { AppError } from '../../control-plane/api/errors';
import type { InferencePort, RunSummary, TextEndpoint } from '../../control-plane/api/inference';
import { NO_DEPLOYMENT } from '../../control-plane/api/startup';
import { renderError } from '../errors/error-response';
import type { RequestIds, RequestTrace } from '../http/request-id';
import { CLIENT_CLOSED_REQUEST } from '../http/request-telemetry';
import type { RequestLog } from '../http/request-log';
import { resolveDeploymentEndpoint } from './deployment-endpoint';
import { TextCompletionRoute, type TextRouteOptions } from './text-completion.route';
import type { StreamLimits } from './http-text-sink';
import { fastLanePaths, sharedFastLaneEndpoint, workspaceFastLanePaths } from './endpoint-table';
import { readBody } from '../http/read-body';
import { WorkspaceRouting } from './workspace-routing';
import { bodyLeftUnread } from '../http/unread-body';
import { SharedChatRoute, SHARED_MODEL_LABEL, type EarlyAttempt } from './shared-chat.route';
import { GuestLane } from './guest-lane';
import { authenticate } from './authenticate';
import { ResponsesRoute } from './responses/responses.route';
import type { RequestGate } from '../http/request-gate';
import { endRequestSpan, markRequestError, startRequestSpan, traceparentHeader } from '../http/request-span';
import type { Tracing } from '../../common/tracing/tracing';

/** The table's fast-lane endpoints under `/d/<slug>/v1` (chat/completions, completions). */
const TEXT_PATH = fastLanePaths();
/** The same endpoints under the workspace base URL `/v1`, the deployment named by the body's `model`. */
const WORKSPACE_TEXT_PATH = workspaceFastLanePaths();
const WORKSPACE_TEXT_ENDPOINTS: Readonly<Record<string, TextEndpoint>> = { 'chat/completions': 'chat.completions', completions: 'completions', responses: 'responses' };
/** The fast lane's endpoints by the path the pattern captured. */
const FAST_LANE_ENDPOINTS: Record<string, TextEndpoint> = { 'chat/completions': 'chat.completions', completions: 'completions', responses: 'responses' };
/** Guest attempts started per event-loop turn (guest-lane.ts): ~16 × 40 µs, well under a millisecond between the owners' I/O. */
const GUEST_ATTEMPTS_PER_TURN = 16;

/**
 * `POST /d/<slug>/v1/chat/completions` and `/completions` answered on node:http directly, in
 * front of Koa: the hot path builds no Koa context, runs no middleware chain and wraps no
 * response (Koa's share was ~30 µs of the gateway's ~150 µs per request; docs/performance.md#what-a-proxy-hop-costs).
 * The workspace base URL's `POST /v1/chat/completions` and `/v1/completions` take it too, as
 * does the shared endpoint's `POST /shared/v1/chat/completions`.
 * Returns false for every other request, which Koa then serves.
 */
export function textFastLane(
  inference: Pick<InferencePort, 'apiKeys' | 'pipeline' | 'responses' | 'backgroundResponses' | 'metrics' | 'deploymentStore' | 'adapterDirectory'>, options: TextRouteOptions & StreamLimits,
  logger: Logger, requestLog: RequestLog, requestIds: RequestIds, gate: RequestGate, tracing: Tracing | null = null,
) {
  const text = new TextCompletionRoute(inference.pipeline, options);
  const responses = new ResponsesRoute(inference.responses, inference.backgroundResponses, options);
  const sharedChat = new SharedChatRoute(inference.apiKeys, inference.pipeline, gate, options);
  const guests = new GuestLane(GUEST_ATTEMPTS_PER_TURN);
  const metrics = inference.metrics;
  const routing = new WorkspaceRouting(inference.deploymentStore, inference.adapterDirectory);

  /** Metrics and the access log of an owner's call, once it ended (a client that left before any header: 499). */
  const recordAnswer = (response: ServerResponse, endpoint: TextEndpoint, deploymentId: string, trace: RequestTrace, summary?: RunSummary | void): void => {
    const status = response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST;
    const seconds = (performance.now() - trace.receivedAt) / 1000;
    metrics.recordRequest(deploymentId, endpoint, status, seconds);
    requestLog.record({ requestId: trace.id, route: endpoint, deployment: deploymentId, status, seconds, summary });
    if (trace.span) endRequestSpan(trace.span, status, deploymentId);
  };

  const serve = async (request: IncomingMessage, response: ServerResponse, slug: string, endpoint: TextEndpoint, trace: RequestTrace): Promise<void> => {
    let deploymentId = NO_DEPLOYMENT;
    let summary: RunSummary | void = undefined;
    try {
      // Resolved and screened in one call: the gate below takes the request's budget only.
      const { key, deployment } = await resolveDeploymentEndpoint(inference, slug, request.headers.authorization, 'text');
      deploymentId = deployment.id;
      const held = gate.enter(request, response, key, deployment);
      if (endpoint === 'responses') summary = await responses.create(request, response, deployment, key, trace, held);
      else summary = await text.handle(request, response, deployment, key, endpoint, trace, held);
    } catch (error) {
      fail(request, response, error, trace);
    }
    recordAnswer(response, endpoint, deploymentId, trace, summary);
  };

  /**
   * `/v1/<endpoint>`: the key's budget is entered before the body is read, as on the
   * deployment's URL but without the deployment, which the body's `model` names (the raw scan:
   * the body is parsed once, by the deployment's route). What the deployment alone refuses
   * (paused) is then decided before admission, and the rest is the deployment's own path:
   * metrics and logs carry its id.
   */
  const serveWorkspace = async (request: IncomingMessage, response: ServerResponse, endpoint: TextEndpoint, trace: RequestTrace): Promise<void> => {
    let deploymentId = NO_DEPLOYMENT;
    let summary: RunSummary | void = undefined;
    try {
      const key = await authenticate(inference.apiKeys, request.headers.authorization);
      const held = gate.enter(request, response, key, null, 'text');
      const { deployment, body } = await routing.routeJson(key, await readBody(request, options.maxBodyBytes, held), true);
      deploymentId = deployment.id;
      gate.routed(request, key, deployment, 'text');
      if (endpoint === 'responses') summary = await responses.createFromBody(response, body, deployment, key, trace);
      else summary = await text.handleBody(response, body, deployment, key, endpoint, trace, held);
    } catch (error) {
      fail(request, response, error, trace);
    }
    recordAnswer(response, endpoint, deploymentId, trace, summary);
  };

  /**
   * A guest's call: metrics and logs name the shared model, never the owner's deployment. Most
   * attempts in a flood are refused in memory, and when the lane starts one its key is usually
   * cached and its body has arrived: SharedChatRoute.screenNow then refuses it synchronously.
   * Refusals (no slot, fair share, credit) are errors built once per model (SharedServing), and
   * rendered once each here: a flood of them costs a header write apiece.
   */
  const serveShared = (request: IncomingMessage, response: ServerResponse, trace: RequestTrace): void => {
    let label = SHARED_MODEL_LABEL;
    const labelled = (model: string) => (label = model);
    const answered = (failed: boolean, error?: unknown, summary?: RunSummary): void => {
      if (failed) {
        if (error instanceof AppError && !response.headersSent && !response.writableEnded) refuse(request, response, error, trace);
        else fail(request, response, error, trace);
      }
      recordAnswer(response, 'chat.completions', label, trace, summary);
    };
    let early: EarlyAttempt;
    try {
      early = sharedChat.screenNow(request, labelled);
    } catch (error) {
      answered(true, error);
      return;
    }
    if (early.refusal) {
      answered(true, early.refusal);
      return;
    }
    sharedChat.handle(request, response, trace, labelled, early).then((summary) => answered(false, undefined, summary), (error) => answered(true, error))
      .catch((error) => logger.error({ err: error, requestId: trace.id }, 'unhandled error'));
  };

  /**
   * A guest's `POST /shared/v1/responses`: no in-memory screen before the parse (chat's flood
   * defence reads chat's fields); the pipeline's guest admission decides the same refusals.
   */
  const serveSharedResponses = async (request: IncomingMessage, response: ServerResponse, trace: RequestTrace): Promise<void> => {
    let label = SHARED_MODEL_LABEL;
    let summary: RunSummary | undefined;
    try {
      const key = await authenticate(inference.apiKeys, request.headers.authorization);
      const held = gate.enter(request, response, key, null, 'text');
      summary = await responses.createShared(request, response, key, trace, held, (model) => (label = model));
    } catch (error) {
      fail(request, response, error, trace);
    }
    recordAnswer(response, 'responses', label, trace, summary);
  };

  /** Rendered errors by identity (status, body, and headers as a flat list): the shared endpoint throws the same refusal object again and again. */
  const rendered = new WeakMap<AppError, { status: number; headers: string[]; body: Buffer }>();
  /** An AppError answered before any byte was sent; the connection stays open when the body was read whole. */
  const refuse = (request: IncomingMessage, response: ServerResponse, error: AppError, trace: RequestTrace): void => {
    let answer = rendered.get(error);
    if (!answer) {
      const { status, headers, body } = renderError(error);
      answer = { status, headers: [...Object.entries(headers).flat(), 'content-length', String(body.length)], body };
      rendered.set(error, answer);
    }
    const headers = [...answer.headers, 'x-request-id', trace.id];
    if (trace.span) {
      markRequestError(trace.span, error.code);
      headers.push('traceparent', traceparentHeader(trace.span));
    }
    if (bodyLeftUnread(request)) headers.push('connection', 'close');
    response.writeHead(answer.status, headers);
    response.end(answer.body);
  };

  const fail = (request: IncomingMessage, response: ServerResponse, error: unknown, trace: RequestTrace): void => {
    if (!(error instanceof AppError)) logger.error({ err: error, requestId: trace.id }, 'unhandled error');
    if (trace.span) markRequestError(trace.span, error instanceof AppError ? error.code : 'internal_error');
    if (response.headersSent || response.writableEnded) {
      response.end();
      return;
    }
    const rendered = renderError(error);
    const connection = bodyLeftUnread(request) ? { connection: 'close' } : {};
    const traced = trace.span ? { traceparent: traceparentHeader(trace.span) } : {};
    response.writeHead(rendered.status, { ...rendered.headers, ...connection, ...traced, 'content-length': String(rendered.body.length), 'x-request-id': trace.id });
    response.end(rendered.body);
  };

  /** The request's id, arrival and, when tracing is on, its server span. */
  const traceOf = (request: IncomingMessage, route: string): RequestTrace => {
    const id = requestIds.from(request.headers['x-request-id']);
    return { id, receivedAt: performance.now(), span: tracing ? startRequestSpan(tracing, request, route, id) : null };
  };

  return (request: IncomingMessage, response: ServerResponse): boolean => {
    if (request.method !== 'POST') return false;
    const match = TEXT_PATH.exec(request.url ?? '');
    if (!match) {
      const workspace = WORKSPACE_TEXT_PATH.exec(request.url ?? '');
      // Only the text endpoints this lane knows; another fast-lane row of the table goes to Koa until it is taught here.
      const endpoint = workspace ? WORKSPACE_TEXT_ENDPOINTS[workspace[1]] : undefined;
      if (endpoint) {
        const trace = traceOf(request, endpoint);
        // Under its span when traced (its log lines name it); no closure is made when tracing is off.
        (trace.span ? tracing!.runIn(trace.span, serveWorkspace, request, response, endpoint, trace) : serveWorkspace(request, response, endpoint, trace))
          .catch((error) => logger.error({ err: error, requestId: trace.id }, 'unhandled error'));
        return true;
      }
      // The shared table's fast-lane rows; as above, one this lane was not taught goes to Koa.
      const shared = sharedFastLaneEndpoint(request.url ?? '');
      if (shared === 'responses.create') {
        const trace = traceOf(request, 'responses');
        (trace.span ? tracing!.runIn(trace.span, serveSharedResponses, request, response, trace) : serveSharedResponses(request, response, trace))
          .catch((error) => logger.error({ err: error, requestId: trace.id }, 'unhandled error'));
        return true;
      }
      if (shared !== 'chat.completions') return false;
      const trace = traceOf(request, 'chat.completions');
      guests.run(() => (trace.span ? tracing!.runIn(trace.span, serveShared, request, response, trace) : serveShared(request, response, trace)));
      return true;
    }
    const endpoint = FAST_LANE_ENDPOINTS[match[2]] ?? 'chat.completions';
    const trace = traceOf(request, endpoint);
    (trace.span ? tracing!.runIn(trace.span, serve, request, response, match[1], endpoint, trace) : serve(request, response, match[1], endpoint, trace))
      .catch((error) => logger.error({ err: error, requestId: trace.id }, 'unhandled error'));
    return true;
  };
}
