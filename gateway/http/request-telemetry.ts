import type { Context, Next } from 'koa';
import type { RunSummary } from '../../control-plane/api/inference';
import { type Metrics, NO_DEPLOYMENT } from '../../control-plane/api/startup';
import type { RequestIds } from './request-id';
import type { RequestLog } from './request-log';

/** The answer to a request that went away before any byte was sent (nginx's convention). */
export const CLIENT_CLOSED_REQUEST = 499;

interface TelemetryState {
  requestId?: string;
  deploymentId?: string;
  summary?: RunSummary;
}

/** The id of the request `context` serves (set by requestTelemetry, outermost). */
export function requestIdOf(context: Context): string | undefined {
  return (context.state as TelemetryState).requestId;
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
 * counts the request by deployment, route and status.
 */
export function requestTelemetry(metrics: Metrics, ids: RequestIds, requestLog: RequestLog, routeLabel: RouteLabelOf) {
  return async (context: Context, next: Next): Promise<void> => {
    const receivedAt = performance.now();
    const state = context.state as TelemetryState;
    const requestId = ids.from(context.req.headers['x-request-id']);
    state.requestId = requestId;
    context.set('x-request-id', requestId);
    try {
      await next();
    } finally {
      const route = routeLabel(context.method, context.path);
      const deployment = state.deploymentId ?? NO_DEPLOYMENT;
      const seconds = (performance.now() - receivedAt) / 1000;
      metrics.recordRequest(deployment, route, context.status, seconds);
      requestLog.record({ requestId, route, deployment, status: context.status, seconds, summary: state.summary });
    }
  };
}
