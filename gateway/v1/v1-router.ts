import type { Context, Next } from 'koa';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { authenticate } from './authenticate';
import { listModels, retrieveModel } from './models.route';
import { TextCompletionRoute, type TextRouteOptions } from './text-completion.route';

/** `/d/<slug>/v1/<rest>`: each deployment's own OpenAI-compatible base URL. */
const DEPLOYMENT_PATH = /^\/d\/([a-z0-9-]{1,64})\/v1(\/.*)$/;
/** Reserved for the shared (per-token) endpoint. */
const SHARED_PATH = /^\/shared\/v1(\/.*)?$/;

/**
 * The `/v1` surface. A plain match instead of a router table: this runs on every request
 * and there are few routes. Auth runs before the deployment lookup so a bad key is always 401.
 */
export function v1Router(controlPlane: ControlPlane, options: TextRouteOptions) {
  const text = new TextCompletionRoute(controlPlane, options);

  return async (context: Context, next: Next): Promise<void> => {
    const path = context.path;
    const match = DEPLOYMENT_PATH.exec(path);
    if (!match) {
      if (!SHARED_PATH.test(path)) return await next();
      await authenticate(controlPlane.apiKeys, context.get('authorization') || undefined);
      throw new AppError('not_found', 'the shared endpoint is not enabled on this server');
    }
    const key = await authenticate(controlPlane.apiKeys, context.get('authorization') || undefined);
    const deployment = await controlPlane.deploymentStore.findBySlug(match[1]);
    if (!deployment || deployment.workspaceId !== key.workspaceId) {
      throw new AppError('deployment_not_found', `no deployment endpoint at /d/${match[1]}/v1 for this API key`);
    }
    const rest = match[2];
    const method = context.method;
    if (rest === '/chat/completions' && method === 'POST') return await text.handle(context, deployment, key, 'chat.completions');
    if (rest === '/completions' && method === 'POST') return await text.handle(context, deployment, key, 'completions');
    if (rest === '/models' && method === 'GET') return json(context, listModels(deployment));
    if (rest.startsWith('/models/') && method === 'GET') return json(context, retrieveModel(deployment, decodeURIComponent(rest.slice(8))));
    throw unknownRoute(method, rest, deployment);
  };
}

function json(context: Context, body: unknown): void {
  context.status = 200;
  context.body = body;
}

function unknownRoute(method: string, rest: string, deployment: Deployment): AppError {
  return new AppError('not_found', `${method} /v1${rest} is not an endpoint of this deployment (${deployment.modelId}); `
    + 'available: POST /v1/chat/completions, POST /v1/completions, GET /v1/models');
}
