import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { type Metrics, NO_DEPLOYMENT } from '../../control-plane/api/startup';
import type { RequestIds } from './request-id';

/** The answer to a request that went away before any byte was sent (nginx's convention). */
export const CLIENT_CLOSED_REQUEST = 499;

interface TelemetryState {
  requestId?: string;
  deploymentId?: string;
}

/** The id of the request `context` serves (set by requestTelemetry, outermost). */
export function requestIdOf(context: Context): string | undefined {
  return (context.state as TelemetryState).requestId;
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
export function requestTelemetry(metrics: Metrics, ids: RequestIds, logger: Logger, routeLabel: RouteLabelOf) {
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
      logRequest(logger, requestId, route, deployment, context.status, seconds);
    }
  };
}

/** With LOG_LEVEL=debug, one line per request; otherwise nothing is built. */
export function logRequest(logger: Logger, requestId: string, route: string, deployment: string, status: number, seconds: number): void {
  if (!logger.isLevelEnabled('debug')) return;
  logger.debug({ requestId, route, deployment, status, durationMs: Math.round(seconds * 1e4) / 10 }, 'request');
}
