import type { RouteLabel } from '../../control-plane/telemetry/metrics';
import { deploymentRouteLabel, SHARED_BASE, sharedRouteLabel } from '../v1/endpoint-table';

/** A deployment's base URL `/d/<slug>/v1`, or the workspace's `/v1` (the same endpoints, routed by `model`). */
const DEPLOYMENT_PREFIX = /^(?:\/d\/[^/]+)?\/v1(?=\/|$)/;

/** The metrics `route` of a request: from a closed set, whatever the path holds. */
export function routeLabel(method: string, path: string): RouteLabel {
  const prefix = DEPLOYMENT_PREFIX.exec(path);
  if (prefix) return deploymentRouteLabel(method, path.slice(prefix[0].length));
  if (path === '/graphql') return 'graphql';
  if (path.startsWith('/files/')) return 'files';
  if (path === '/healthz') return 'healthz';
  if (path === '/readyz') return 'readyz';
  if (path === '/metrics') return 'metrics';
  if (path.startsWith('/agent/')) return 'agent_download';
  if (path === SHARED_BASE || path.startsWith(`${SHARED_BASE}/`)) return sharedRouteLabel(method, path.slice(SHARED_BASE.length));
  return 'other';
}
