import type { Context, Next } from 'koa';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import { DeploymentEngines } from '../../control-plane/replicas/deployment-engines';
import { authenticate } from './authenticate';
import { attributeDeployment } from '../http/request-telemetry';
import { resolveDeploymentEndpoint } from './deployment-endpoint';
import { EmbeddingsRoute } from './embeddings.route';
import { ImagesRoute, type MediaRouteOptions } from './media/images.route';
import { RequestsRoute } from './media/requests.route';
import { VideosRoute } from './media/videos.route';
import { ModelsRoute } from './models.route';
import type { TextRouteOptions } from './text-completion.route';
import { decodePathSegment } from '../http/request-parsing';
import { listSharedModels, retrieveSharedModel } from './shared-models.route';
import { shortened } from '../../control-plane/errors/quote-value';

export type V1RouteOptions = TextRouteOptions & MediaRouteOptions;

/** `/requests/{id}[/cancel]`, `/videos/{id}[/content|/cancel]`. */
const RECORD_PATH = /^\/(requests|videos)\/([^/]+)(\/content|\/cancel)?$/;

/** `/d/<slug>/v1/<rest>`: each deployment's own OpenAI-compatible base URL. */
const DEPLOYMENT_PATH = /^\/d\/([a-z0-9-]{1,64})\/v1(\/.*)$/;
/** Any segment where the slug goes: one that cannot be a slug is refused (a NUL: 400) or unknown (404). */
const ANY_DEPLOYMENT_PATH = /^\/d\/([^/]+)\/v1\//;
/** The shared (per-token) endpoint; its chat/completions is answered by the fast lane. */
const SHARED_PATH = /^\/shared\/v1(\/.*)?$/;

/**
 * The `/v1` surface but for chat/completions, which the fast lane (text-fast-lane.ts) answers
 * before Koa. A plain match instead of a router table; auth runs before the deployment lookup.
 */
export function v1Router(controlPlane: ControlPlane, options: V1RouteOptions) {
  const images = new ImagesRoute(controlPlane, options);
  const videos = new VideosRoute(controlPlane, options);
  const requests = new RequestsRoute(controlPlane);
  const embeddings = new EmbeddingsRoute(controlPlane, options);
  const models = new ModelsRoute(new DeploymentEngines(controlPlane.replicas, controlPlane.localProvider));

  return async (context: Context, next: Next): Promise<void> => {
    const path = context.path;
    const match = DEPLOYMENT_PATH.exec(path);
    if (!match) {
      const other = ANY_DEPLOYMENT_PATH.exec(path);
      if (other) {
        await authenticate(controlPlane.apiKeys, context.get('authorization') || undefined);
        const slug = decodePathSegment(other[1], 'slug');
        throw new AppError('deployment_not_found', `no deployment endpoint at /d/${shortened(slug)}/v1: slugs are 1-64 lowercase letters, digits and "-"`);
      }
      const shared = SHARED_PATH.exec(path);
      if (!shared) return await next();
      await authenticate(controlPlane.apiKeys, context.get('authorization') || undefined);
      return sharedRoute(context, controlPlane, shared[1] ?? '');
    }
    const { key, deployment } = await resolveDeploymentEndpoint(controlPlane, match[1], context.get('authorization') || undefined);
    attributeDeployment(context, deployment.id);
    const rest = match[2];
    const method = context.method;
    if (rest === '/models' && method === 'GET') return json(context, await models.list(deployment));
    if (rest.startsWith('/models/') && method === 'GET') return json(context, await models.retrieve(deployment, decodePathSegment(rest.slice(8), 'model')));
    if (method === 'POST') {
      if (rest === '/embeddings') return await embeddings.handle(context, deployment, key);
      if (rest === '/images/generations') return await images.handle(context, deployment, key, 'generation');
      if (rest === '/images/edits') return await images.handle(context, deployment, key, 'edit');
      if (rest === '/videos') return await videos.create(context, deployment, key, 'videos');
      if (rest === '/videos/generations') return await videos.create(context, deployment, key, 'videos/generations');
    }
    if (rest === '/requests' && method === 'GET') return await requests.list(context, deployment);
    if (rest === '/videos' && method === 'GET') return await videos.list(context, deployment);
    const record = RECORD_PATH.exec(rest);
    if (record) {
      const [, collection, encodedId, action] = record;
      const id = decodePathSegment(encodedId, 'id');
      if (collection === 'requests' && !action && method === 'GET') return await requests.retrieve(context, key, id);
      if (collection === 'requests' && action === '/cancel' && method === 'POST') return await requests.cancel(context, key, id);
      if (collection === 'videos' && !action && method === 'GET') return await videos.retrieve(context, key, id);
      if (collection === 'videos' && action === '/content' && method === 'GET') return await videos.content(context, key, id);
      if (collection === 'videos' && action === '/cancel' && method === 'POST') return await videos.cancel(context, key, id);
    }
    throw unknownRoute(method, rest, deployment);
  };
}


/** `GET /shared/v1/models[/{id}]` (the id `shared/<model-id>`, slashes raw or percent-encoded). */
function sharedRoute(context: Context, controlPlane: ControlPlane, rest: string): void {
  if (context.method === 'GET' && rest === '/models') return json(context, listSharedModels(controlPlane.shared));
  if (context.method === 'GET' && rest.startsWith('/models/')) {
    return json(context, retrieveSharedModel(controlPlane.shared, decodePathSegment(rest.slice(8), 'model')));
  }
  throw new AppError('not_found', `${context.method} /shared/v1${shortened(rest)} is not an endpoint of the shared endpoint; available: `
    + 'POST /shared/v1/chat/completions, GET /shared/v1/models, GET /shared/v1/models/{id}');
}

function json(context: Context, body: unknown): void {
  context.status = 200;
  context.body = body;
}

function unknownRoute(method: string, rest: string, deployment: Deployment): AppError {
  return new AppError('not_found', `${method} /v1${shortened(rest)} is not an endpoint of this deployment (${deployment.modelId}); available: `
    + 'POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, GET /v1/models, POST /v1/images/generations, POST /v1/images/edits, '
    + 'POST /v1/videos, POST /v1/videos/generations, GET /v1/videos/{id}[/content], POST /v1/videos/{id}/cancel, '
    + 'GET /v1/requests, GET /v1/requests/{id}, POST /v1/requests/{id}/cancel');
}
