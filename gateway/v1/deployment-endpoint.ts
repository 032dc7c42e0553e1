import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { authenticate } from './authenticate';

/**
 * The caller and the deployment behind `/d/<slug>/v1`. Auth runs first, so a bad key is
 * always 401; another workspace's deployment answers 404 like a missing one, so endpoints
 * cannot be probed.
 */
export async function resolveDeploymentEndpoint(controlPlane: ControlPlane, slug: string, authorization: string | undefined): Promise<{ key: AuthenticatedKey; deployment: Deployment }> {
  const key = await authenticate(controlPlane.apiKeys, authorization);
  const deployment = await controlPlane.deploymentStore.findBySlug(slug);
  if (!deployment || deployment.workspaceId !== key.workspaceId) {
    throw new AppError('deployment_not_found', `no deployment endpoint at /d/${slug}/v1 for this API key`);
  }
  return { key, deployment };
}
