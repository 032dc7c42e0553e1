import type { AuthenticatedKey, Deployment, InferencePort } from '../../control-plane/api/inference';
import { authenticate } from './authenticate';

/**
 * The caller and the deployment behind `/d/<slug>/v1`. Auth runs first, so a bad key is
 * always 401; the pipeline resolves the slug (another workspace's deployment answers 404 like
 * a missing one). `spends: 'text'`: the pipeline also refuses what the key and deployment alone
 * decide (credit, pause, a used-up minute or day) in the same call, before any body is read.
 */
export async function resolveDeploymentEndpoint(inference: Pick<InferencePort, 'apiKeys' | 'pipeline'>, slug: string, authorization: string | undefined, spends?: 'text'): Promise<{ key: AuthenticatedKey; deployment: Deployment }> {
  const key = await authenticate(inference.apiKeys, authorization);
  return { key, deployment: await inference.pipeline.deployment(key, slug, spends) };
}
