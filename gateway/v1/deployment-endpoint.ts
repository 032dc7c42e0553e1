import type { AuthenticatedKey, Deployment, InferencePort } from '../../control-plane/api/inference';
import { authenticate } from './authenticate';

/**
 * The caller and the deployment behind `/d/<slug>/v1`. Auth runs first, so a bad key is
 * always 401; the pipeline resolves the slug (another workspace's deployment answers 404 like
 * a missing one).
 */
export async function resolveDeploymentEndpoint(inference: Pick<InferencePort, 'apiKeys' | 'pipeline'>, slug: string, authorization: string | undefined): Promise<{ key: AuthenticatedKey; deployment: Deployment }> {
  const key = await authenticate(inference.apiKeys, authorization);
  return { key, deployment: await inference.pipeline.deployment(key, slug) };
}
