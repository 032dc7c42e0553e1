import { AppError, shortened } from '../../control-plane/api/errors';
import type { AdapterDirectory, Deployment, ListedAdapter } from '../../control-plane/api/inference';
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
  constructor(private readonly engines: DeploymentEngines, private readonly adapters?: Pick<AdapterDirectory, 'listed'>) {}

  endpoints(): RouteEndpoints {
    return {
      deployment: {
        'models.list': async (context, deployment) => json(context, await this.list(deployment)),
        'models.retrieve': async (context, deployment, _key, param) => json(context, await this.retrieve(deployment, modelOf(param))),
      },
    };
  }

  /** The deployment's model, then the LoRA adapters attached to it (`parent`: the base model, as vLLM lists them). */
  async list(deployment: Deployment) {
    const adapters = await this.adaptersOf(deployment.workspaceId, [deployment]);
    return { object: 'list', data: [await this.modelObject(deployment), ...adapters.map((adapter) => adapterObject(adapter, deployment.workspaceId))] };
  }

  /** Model ids contain `/`, so the id is the rest of the path. */
  async retrieve(deployment: Deployment, id: string) {
    const adapter = id === deployment.modelId ? undefined : (await this.adaptersOf(deployment.workspaceId, [deployment])).find((listed) => listed.name === id);
    if (adapter) return adapterObject(adapter, deployment.workspaceId);
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
  async workspaceList(workspaceId: string, deployments: readonly Deployment[]) {
    const adapters = await this.adaptersOf(workspaceId, deployments);
    return {
      object: 'list',
      data: [...await Promise.all(deployments.map(async (deployment) => await this.workspaceModel(deployment))), ...adapters.map((adapter) => adapterObject(adapter, workspaceId))],
    };
  }

  private async adaptersOf(workspaceId: string, deployments: readonly Deployment[]): Promise<ListedAdapter[]> {
    return this.adapters ? await this.adapters.listed(workspaceId, deployments.map((deployment) => deployment.id)) : [];
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

/** An attached LoRA adapter as OpenAI's model object, with vLLM's `parent` (and `root`): the base model it runs on. */
function adapterObject(adapter: ListedAdapter, workspaceId: string) {
  return { id: adapter.name, object: 'model', created: Math.floor(adapter.createdAt.getTime() / 1000), owned_by: workspaceId, root: adapter.baseModel, parent: adapter.baseModel };
}
