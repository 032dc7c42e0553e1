import { AppError, shortened } from '../../control-plane/api/errors';
import type { Deployment } from '../../control-plane/api/inference';
import type { DeploymentEngines } from '../../control-plane/api/startup';
import { json, modelOf, type RouteEndpoints } from './route-endpoints';
import { STAND_IN_ENGINE_KIND, STAND_IN_ENGINE_LABEL, STAND_IN_NOTE } from '../stand-in-engine';

/**
 * `GET /v1/models[/{id}]`: the endpoint's one model in OpenAI's model-object shape. A model
 * answered by the built-in CPU stand-in also carries `engine: "cpu-stand-in"` and a `note`
 * saying so, since its id is the real model's; OpenAI SDKs keep unknown fields. A model served
 * by a real engine carries neither.
 */
export class ModelsRoute {
  constructor(private readonly engines: DeploymentEngines) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'models.list': async (context, deployment) => json(context, await this.list(deployment)),
        'models.retrieve': async (context, deployment, _key, param) => json(context, await this.retrieve(deployment, modelOf(param))),
      },
    };
  }

  async list(deployment: Deployment) {
    return { object: 'list', data: [await this.modelObject(deployment)] };
  }

  /** Model ids contain `/`, so the id is the rest of the path. */
  async retrieve(deployment: Deployment, id: string) {
    if (id !== deployment.modelId) {
      throw new AppError('model_not_found', `model '${shortened(id)}' is not served by this endpoint; it serves '${deployment.modelId}'`, { param: 'model' });
    }
    return await this.modelObject(deployment);
  }

  /**
   * The workspace base URL's `GET /v1/models`: one model object per deployment, its id the
   * slug (what `model` takes there) and `root` the catalog model it serves (vLLM's field for
   * the model behind a served name; OpenAI SDKs keep unknown fields).
   */
  async workspaceList(deployments: readonly Deployment[]) {
    return { object: 'list', data: await Promise.all(deployments.map(async (deployment) => await this.workspaceModel(deployment))) };
  }

  async workspaceModel(deployment: Deployment) {
    return await this.modelObject(deployment, { id: deployment.slug, root: deployment.modelId });
  }

  private async modelObject(deployment: Deployment, naming: { id: string; root?: string } = { id: deployment.modelId }) {
    const model = { id: naming.id, object: 'model', created: Math.floor(deployment.createdAt.getTime() / 1000), owned_by: deployment.workspaceId, ...(naming.root ? { root: naming.root } : {}) };
    if (!(await this.engines.of(deployment)).has(STAND_IN_ENGINE_KIND)) return model;
    return { ...model, engine: STAND_IN_ENGINE_LABEL, note: STAND_IN_NOTE };
  }
}
