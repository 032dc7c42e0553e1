import type { IncomingMessage } from 'node:http';
import type { RequestTrace as WorkTrace } from '../../control-plane/api/inference';
import { ATTR } from '../../common/tracing/span-attributes';
import { parentOf, SpanKind, SpanStatusCode, traceparentOf, type Span, type Tracing } from '../../common/tracing/tracing';

/**
 * The HTTP server span of one request, the root of its trace here (or the child of the
 * caller's, when the request came with a `traceparent`). Made only when tracing is on: every
 * caller holds a `Tracing | null` and makes nothing while it is null.
 */
export function startRequestSpan(tracing: Tracing, request: IncomingMessage, route: string, requestId: string): Span {
  const incoming = request.headers.traceparent;
  const url = request.url ?? '/';
  const query = url.indexOf('?');
  return tracing.startSpan(`${request.method} ${route}`, SpanKind.SERVER, parentOf(typeof incoming === 'string' ? incoming : undefined), {
    [ATTR.httpMethod]: request.method ?? 'GET', [ATTR.httpRoute]: route, [ATTR.urlPath]: query === -1 ? url : url.slice(0, query), [ATTR.requestId]: requestId,
  });
}

/**
 * Ends it with the answer's status and what the request resolved to (a deployment id, a guest's
 * `shared/<model-id>`, or `none`). 5xx is an error of ours; 4xx is the caller's (OpenTelemetry's
 * HTTP server convention) and shows in `error.type` only when a route set one.
 */
export function endRequestSpan(span: Span, status: number, resolvedTo: string | undefined): void {
  span.setAttribute(ATTR.httpStatus, status);
  if (resolvedTo && resolvedTo !== 'none') span.setAttribute(resolvedTo.startsWith('shared/') ? ATTR.sharedModel : ATTR.deploymentId, resolvedTo);
  if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}

/** The error code an answer renders (`rate_limit_error`, …) on the request's span. */
export function markRequestError(span: Span | null, code: string): void {
  span?.setAttribute(ATTR.errorType, code);
}

/** What the pipeline is told of the request's trace: its request id, and its span as the parent of the pipeline's. */
export function workTraceOf(requestId: string | undefined, span: Span | null | undefined): WorkTrace {
  if (!span) return { requestId };
  const parent = span.spanContext();
  return { requestId, traceId: parent.traceId, parent };
}

/** The `traceparent` response header's value (the request's server span), for answers of a traced request. */
export function traceparentHeader(span: Span): string {
  return traceparentOf(span);
}
