import type { Context, Next } from 'koa';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { authenticate } from './authenticate';
import { attributeDeployment } from '../http/request-telemetry';
import { resolveDeploymentEndpoint } from './deployment-endpoint';
import { ImagesRoute, type MediaRouteOptions } from './media/images.route';
import { RequestsRoute } from './media/requests.route';
import { VideosRoute } from './media/videos.route';
import { listModels, retrieveModel } from './models.route';
import type { TextRouteOptions } from './text-completion.route';
import { decodePathSegment } from '../http/request-parsing';

export type V1RouteOptions = TextRouteOptions & MediaRouteOptions;

/** `/requests/{id}[/cancel]`, `/videos/{id}[/content|/cancel]`. */
const RECORD_PATH = /^\/(requests|videos)\/([^/]+)(\/content|\/cancel)?$/;

/** `/d/<slug>/v1/<rest>`: each deployment's own OpenAI-compatible base URL. */
const DEPLOYMENT_PATH = /^\/d\/([a-z0-9-]{1,64})\/v1(\/.*)$/;
/** Reserved for the shared (per-token) endpoint. */
const SHARED_PATH = /^\/shared\/v1(\/.*)?$/;

/**
 * The `/v1` surface but for chat/completions, which the fast lane (text-fast-lane.ts) answers
 * before Koa. A plain match instead of a router table; auth runs before the deployment lookup.
 */
export function v1Router(controlPlane: ControlPlane, options: V1RouteOptions) {
  const images = new ImagesRoute(controlPlane, options);
  const videos = new VideosRoute(controlPlane, options);
  const requests = new RequestsRoute(controlPlane);

  return async (context: Context, next: Next): Promise<void> => {
    const path = context.path;
    const match = DEPLOYMENT_PATH.exec(path);
    if (!match) {
      if (!SHARED_PATH.test(path)) return await next();
      await authenticate(controlPlane.apiKeys, context.get('authorization') || undefined);
      throw new AppError('not_found', 'the shared endpoint is not enabled on this server');
    }
    const { key, deployment } = await resolveDeploymentEndpoint(controlPlane, match[1], context.get('authorization') || undefined);
    attributeDeployment(context, deployment.id);
    const rest = match[2];
    const method = context.method;
    if (rest === '/models' && method === 'GET') return json(context, listModels(deployment));
    if (rest.startsWith('/models/') && method === 'GET') return json(context, retrieveModel(deployment, decodePathSegment(rest.slice(8), 'model')));
    if (method === 'POST') {
      if (rest === '/images/generations') return await images.handle(context, deployment, key, 'generation');
      if (rest === '/images/edits') return await images.handle(context, deployment, key, 'edit');
      if (rest === '/videos') return await videos.create(context, deployment, key, 'videos');
      if (rest === '/videos/generations') return await videos.create(context, deployment, key, 'videos/generations');
    }
    if (rest === '/requests' && method === 'GET') return await requests.list(context, deployment);
    if (rest === '/videos' && method === 'GET') return await videos.list(context, deployment);
    const record = RECORD_PATH.exec(rest);
    if (record) {
      const [, collection, id, action] = record;
      if (collection === 'requests' && !action && method === 'GET') return await requests.retrieve(context, key, id);
      if (collection === 'requests' && action === '/cancel' && method === 'POST') return await requests.cancel(context, key, id);
      if (collection === 'videos' && !action && method === 'GET') return await videos.retrieve(context, key, id);
      if (collection === 'videos' && action === '/content' && method === 'GET') return await videos.content(context, key, id);
      if (collection === 'videos' && action === '/cancel' && method === 'POST') return await videos.cancel(context, key, id);
    }
    throw unknownRoute(method, rest, deployment);
  };
}


function json(context: Context, body: unknown): void {
  context.status = 200;
  context.body = body;
}

function unknownRoute(method: string, rest: string, deployment: Deployment): AppError {
  return new AppError('not_found', `${method} /v1${rest} is not an endpoint of this deployment (${deployment.modelId}); available: `
    + 'POST /v1/chat/completions, POST /v1/completions, GET /v1/models, POST /v1/images/generations, POST /v1/images/edits, '
    + 'POST /v1/videos, POST /v1/videos/generations, GET /v1/videos/{id}[/content], POST /v1/videos/{id}/cancel, '
    + 'GET /v1/requests, GET /v1/requests/{id}, POST /v1/requests/{id}/cancel');
}
