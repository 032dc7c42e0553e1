import { deploymentRouteLabel, ENDPOINT_LABELS, SHARED_BASE, sharedRouteLabel, type EndpointLabel } from './v1/endpoint-table';

/** The labels of the surfaces outside the endpoint tables, and `other` for any path of none. */
const SURFACE_LABELS = ['graphql', 'files', 'uploads', 'healthz', 'readyz', 'metrics', 'agent_download', 'other'] as const;

export type RouteLabel = EndpointLabel | (typeof SURFACE_LABELS)[number];

/**
 * The metrics `route` label's values: a closed set each request is mapped to (routeLabel), so
 * neither a raw path nor user input ever becomes a label value (each value is a time series
 * kept forever, and dashboards depend on them). The control plane's Metrics is given this set.
 */
export const ROUTE_LABELS: readonly RouteLabel[] = [...ENDPOINT_LABELS, ...SURFACE_LABELS];

/** A deployment's base URL `/d/<slug>/v1`, or the workspace's `/v1` (the same endpoints, routed by `model`). */
const DEPLOYMENT_PREFIX = /^(?:\/d\/[^/]+)?\/v1(?=\/|$)/;

/** The metrics `route` of a request: from a closed set, whatever the path holds. */
export function routeLabel(method: string, path: string): RouteLabel {
  const prefix = DEPLOYMENT_PREFIX.exec(path);
  if (prefix) return deploymentRouteLabel(method, path.slice(prefix[0].length));
  if (path === '/graphql') return 'graphql';
  if (path.startsWith('/files/')) return 'files';
  if (path.startsWith('/uploads/')) return 'uploads';
  if (path === '/healthz') return 'healthz';
  if (path === '/readyz') return 'readyz';
  if (path === '/metrics') return 'metrics';
  if (path.startsWith('/agent/')) return 'agent_download';
  if (path === SHARED_BASE || path.startsWith(`${SHARED_BASE}/`)) return sharedRouteLabel(method, path.slice(SHARED_BASE.length));
  return 'other';
}
