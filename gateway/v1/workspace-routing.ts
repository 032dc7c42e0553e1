import { AppError, shortened } from '../../control-plane/api/errors';
import { type AdapterDirectory, type AuthenticatedKey, type Deployment, type DeploymentStore, pickDeployment } from '../../control-plane/api/inference';
import type { MultipartForm } from '../http/multipart';
import { scanModel, withModel } from './model-field';

/**
 * The workspace base URL (`/v1/…`): which of the key's workspace's deployments a request's
 * `model` names (workspace-model.ts), and its body as that deployment's own URL would have
 * received it. Both the fast lane (chat, completions) and the Koa router use it, so the rule
 * is one.
 */
export class WorkspaceRouting {
  constructor(
    private readonly deployments: Pick<DeploymentStore, 'listOfWorkspace'>,
    /** LoRA adapters of the workspace (docs/adapters.md); absent: `model` names deployments only. */
    private readonly adapters?: Pick<AdapterDirectory, 'deploymentFor'>,
  ) {}

  /** The workspace's deployments (cached, oldest first): what `GET /v1/models` lists. */
  async deploymentsOf(key: AuthenticatedKey): Promise<readonly Deployment[]> {
    return await this.deployments.listOfWorkspace(key.workspaceId);
  }

  /** The deployment `model` names (slug or catalog model id), or its 400/404. */
  async find(key: AuthenticatedKey, model: unknown): Promise<Deployment> {
    return (await this.resolve(key, model, false)).deployment;
  }

  /**
   * A JSON body's deployment, and the body with `model` set to the deployment's model; a body
   * naming an adapter of the workspace keeps its `model` (the pipeline resolves it again on the
   * deployment, and answers carry it). `adapters`: the endpoint serves adapters (chat,
   * completions, responses); elsewhere an adapter name is a 400 naming `model`.
   */
  async routeJson(key: AuthenticatedKey, raw: Buffer, adapters = false): Promise<{ deployment: Deployment; body: Buffer }> {
    const scanned = scanModel(raw);
    const { deployment, adapter } = await this.resolve(key, scanned.model, adapters);
    return { deployment, body: adapter ? raw : withModel(raw, scanned, deployment.modelId) };
  }

  /** A multipart form's deployment (its `model` field), the field then set to the deployment's model. */
  async routeForm(key: AuthenticatedKey, form: MultipartForm): Promise<Deployment> {
    const deployment = await this.find(key, form.fields.model);
    form.fields.model = deployment.modelId;
    return deployment;
  }

  /** A slug or served model first; a name no deployment answers to may be an adapter of the workspace. */
  private async resolve(key: AuthenticatedKey, model: unknown, adapters: boolean): Promise<{ deployment: Deployment; adapter: boolean }> {
    const deployments = await this.deploymentsOf(key);
    try {
      return { deployment: pickDeployment(deployments, model), adapter: false };
    } catch (error) {
      if (!this.adapters || typeof model !== 'string' || !(error instanceof AppError) || error.code !== 'model_not_found') throw error;
      const deployment = await this.adapters.deploymentFor(key.workspaceId, model, deployments);
      if (!deployment) throw error;
      if (!adapters) {
        throw new AppError('invalid_request', `model '${shortened(model)}' is a LoRA adapter: adapters serve /v1/chat/completions, /v1/completions and /v1/responses only`, { param: 'model' });
      }
      return { deployment, adapter: true };
    }
  }
}
