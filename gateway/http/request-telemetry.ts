import type { Context, Next } from 'koa';
import type { RunSummary } from '../../control-plane/api/inference';
import { type Metrics, NO_DEPLOYMENT } from '../../control-plane/api/startup';
import type { RequestIds } from './request-id';
import type { RequestLog } from './request-log';
import { endRequestSpan, markRequestError, startRequestSpan, traceparentHeader, workTraceOf } from './request-span';
import type { RequestTrace as WorkTrace } from '../../control-plane/api/inference';
import type { Span, Tracing } from '../../common/tracing/tracing';

/** The answer to a request that went away before any byte was sent (nginx's convention). */
export const CLIENT_CLOSED_REQUEST = 499;

interface TelemetryState {
  requestId?: string;
  deploymentId?: string;
  summary?: RunSummary;
  /** The request's HTTP server span, when tracing is on. */
  span?: Span;
}

/** The id of the request `context` serves (set by requestTelemetry, outermost). */
export function requestIdOf(context: Context): string | undefined {
  return (context.state as TelemetryState).requestId;
}

/** The request's id and span, as the pipeline takes them (its spans are the span's children). */
export function workTraceOfContext(context: Context): WorkTrace {
  const state = context.state as TelemetryState;
  return workTraceOf(state.requestId, state.span);
}

/** The error code an answer renders, on the request's span (when traced). */
export function markErrorOf(context: Context, code: string): void {
  const span = (context.state as TelemetryState).span;
  if (span) markRequestError(span, code);
}

/** The `traceparent` of the request's span, which an async record stores so its run and webhook continue the trace; undefined when tracing is off. */
export function traceparentOfContext(context: Context): string | undefined {
  const span = (context.state as TelemetryState).span;
  return span ? traceparentHeader(span) : undefined;
}

/** What the pipeline knew when this request's answer ended (its tokens), for its log line. */
export function recordSummary(context: Context, summary: RunSummary): void {
  (context.state as TelemetryState).summary = summary;
}

/** Labels this request's metrics with the deployment it resolved to. */
export function attributeDeployment(context: Context, deploymentId: string): void {
  (context.state as TelemetryState).deploymentId = deploymentId;
}

/**
 * The metrics `route` of a request, from a closed set whatever the path holds (gateway/route-label.ts,
 * which knows every surface: passed in, so this plumbing imports none of them).
 */
export type RouteLabelOf = (method: string, path: string) => string;

/**
 * Outermost Koa middleware: gives the request its id (echoed as `X-Request-Id` on every
 * answer, errors included) and, once the error middleware inside it has rendered any error,
 * counts the request by deployment, route and status. With tracing on, the request gets its
 * HTTP server span (a caller's `traceparent` is its parent), answers carry its `traceparent`,
 * and what runs inside logs its ids.
 */
export function requestTelemetry(metrics: Metrics, ids: RequestIds, requestLog: RequestLog, routeLabel: RouteLabelOf, tracing: Tracing | null = null) {
  return async (context: Context, next: Next): Promise<void> => {
    const receivedAt = performance.now();
    const state = context.state as TelemetryState;
    const requestId = ids.from(context.req.headers['x-request-id']);
    state.requestId = requestId;
    context.set('x-request-id', requestId);
    const span = tracing ? startRequestSpan(tracing, context.req, routeLabel(context.method, context.path), requestId) : undefined;
    if (span) {
      state.span = span;
      context.set('traceparent', traceparentHeader(span));
    }
    try {
      await (span ? tracing!.runIn(span, next) : next());
    } finally {
      const route = routeLabel(context.method, context.path);
      const deployment = state.deploymentId ?? NO_DEPLOYMENT;
      const seconds = (performance.now() - receivedAt) / 1000;
      metrics.recordRequest(deployment, route, context.status, seconds);
      requestLog.record({ requestId, route, deployment, status: context.status, seconds, summary: state.summary });
      if (span) endRequestSpan(span, context.status, deployment);
    }
  };
}
