import type { RouteLabel } from '../../control-plane/telemetry/metrics';

const DEPLOYMENT_PREFIX = /^\/d\/[^/]+\/v1(?=\/|$)/;

/** The metrics `route` of a request: from a closed set, whatever the path holds. */
export function routeLabel(method: string, path: string): RouteLabel {
  const prefix = DEPLOYMENT_PREFIX.exec(path);
  if (prefix) return deploymentRoute(method, path.slice(prefix[0].length));
  if (path === '/graphql') return 'graphql';
  if (path.startsWith('/files/')) return 'files';
  if (path === '/healthz') return 'healthz';
  if (path === '/readyz') return 'readyz';
  if (path === '/metrics') return 'metrics';
  if (path === '/shared/v1' || path.startsWith('/shared/v1/')) return 'shared';
  return 'other';
}

function deploymentRoute(method: string, rest: string): RouteLabel {
  switch (rest) {
    case '/chat/completions': return 'chat.completions';
    case '/completions': return 'completions';
    case '/embeddings': return 'embeddings';
    case '/images/generations': return 'images.generations';
    case '/images/edits': return 'images.edits';
    case '/videos/generations': return 'videos';
    case '/videos': return method === 'POST' ? 'videos' : 'videos.retrieve';
    case '/requests': return 'requests';
    case '/models': return 'models';
    default:
      if (rest.startsWith('/videos/')) return 'videos.retrieve';
      if (rest.startsWith('/requests/')) return 'requests';
      if (rest.startsWith('/models/')) return 'models';
      return 'v1.other';
  }
}
