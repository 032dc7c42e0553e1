import { type AuthenticatedKey, type Deployment, type DeploymentStore, pickDeployment } from '../../control-plane/api/inference';
import type { MultipartForm } from '../http/multipart';
import { scanModel, withModel } from './model-field';

/**
 * The workspace base URL (`/v1/…`): which of the key's workspace's deployments a request's
 * `model` names (workspace-model.ts), and its body as that deployment's own URL would have
 * received it. Both the fast lane (chat, completions) and the Koa router use it, so the rule
 * is one.
 */
export class WorkspaceRouting {
  constructor(private readonly deployments: Pick<DeploymentStore, 'listOfWorkspace'>) {}

  /** The workspace's deployments (cached, oldest first): what `GET /v1/models` lists. */
  async deploymentsOf(key: AuthenticatedKey): Promise<readonly Deployment[]> {
    return await this.deployments.listOfWorkspace(key.workspaceId);
  }

  /** The deployment `model` names (slug or catalog model id), or its 400/404. */
  async find(key: AuthenticatedKey, model: unknown): Promise<Deployment> {
    return pickDeployment(await this.deploymentsOf(key), model);
  }

  /** A JSON body's deployment, and the body with `model` set to the deployment's model. */
  async routeJson(key: AuthenticatedKey, raw: Buffer): Promise<{ deployment: Deployment; body: Buffer }> {
    const scanned = scanModel(raw);
    const deployment = await this.find(key, scanned.model);
    return { deployment, body: withModel(raw, scanned, deployment.modelId) };
  }

  /** A multipart form's deployment (its `model` field), the field then set to the deployment's model. */
  async routeForm(key: AuthenticatedKey, form: MultipartForm): Promise<Deployment> {
    const deployment = await this.find(key, form.fields.model);
    form.fields.model = deployment.modelId;
    return deployment;
  }
}
