import type { ApiKeyService } from '../api-keys/api-key.service';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentService } from '../deployments/deployment.service';
import type { WorkspaceService } from './workspace.service';
import { UNLIMITED } from '../budgets/budget-kinds';
import type { WorkspaceBudgets } from '../budgets/workspace-budgets';

export type FirstRunResult =
  | { created: true; apiKey: string; deployment: Deployment }
  | { created: false; deployments: Deployment[] };

/**
 * A fresh install gets a `dev` workspace (allowed the host's local capacity), one API key (plaintext returned here, shown once,
 * stored hashed) and one deployment of the default chat model, or of the GGUF file given at
 * start-up (`LOCAL_MODEL_PATH`). Later starts change nothing.
 */
export async function ensureFirstRun(services: {
  workspaces: WorkspaceService; apiKeys: ApiKeyService; deployments: DeploymentService; catalog: Catalog;
  workspaceBudgets: Pick<WorkspaceBudgets, 'set'>;
}): Promise<FirstRunResult> {
  const existing = await services.workspaces.first();
  if (existing) return { created: false, deployments: await services.deployments.list(existing.id) };
  const workspace = await services.workspaces.create('dev');
  // The operator's own workspace: the host's local capacity is its to use (other workspaces are granted it explicitly).
  await services.workspaceBudgets.set(workspace.id, 'local_replicas', 'workspace', UNLIMITED);
  const { plaintext } = await services.apiKeys.create(workspace.id, 'first key');
  const { deployment } = await services.deployments.create(workspace.id, {
    modelId: (services.catalog.localModel() ?? services.catalog.defaultChatModel()).id, priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1, autoscale: false,
  });
  return { created: true, apiKey: plaintext, deployment };
}
