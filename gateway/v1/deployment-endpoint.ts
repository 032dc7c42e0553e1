import type { AuthenticatedKey, Deployment } from '../../control-plane/api/inference';
import type { ControlPlane } from '../../control-plane/api/startup';
import { authenticate } from './authenticate';

/**
 * The caller and the deployment behind `/d/<slug>/v1`. Auth runs first, so a bad key is
 * always 401; the pipeline resolves the slug (another workspace's deployment answers 404 like
 * a missing one).
 */
export async function resolveDeploymentEndpoint(controlPlane: Pick<ControlPlane, 'apiKeys' | 'pipeline'>, slug: string, authorization: string | undefined): Promise<{ key: AuthenticatedKey; deployment: Deployment }> {
  const key = await authenticate(controlPlane.apiKeys, authorization);
  return { key, deployment: await controlPlane.pipeline.deployment(key, slug) };
}
