import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';

/** The endpoint's one model in OpenAI's model-object shape. */
export function modelObject(deployment: Deployment) {
  return { id: deployment.modelId, object: 'model', created: Math.floor(deployment.createdAt.getTime() / 1000), owned_by: deployment.workspaceId };
}

/** `GET /v1/models`: a list with the endpoint's model. */
export function listModels(deployment: Deployment) {
  return { object: 'list', data: [modelObject(deployment)] };
}

/** `GET /v1/models/{id}` (model ids contain `/`, so the id is the rest of the path). */
export function retrieveModel(deployment: Deployment, id: string) {
  if (id !== deployment.modelId) {
    throw new AppError('model_not_found', `model '${id}' is not served by this endpoint; it serves '${deployment.modelId}'`, { param: 'model' });
  }
  return modelObject(deployment);
}
