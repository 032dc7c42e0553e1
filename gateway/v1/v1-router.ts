import type { Context, Next } from 'koa';
import { AppError, shortened } from '../../control-plane/api/errors';
import type { AuthenticatedKey, Deployment, InferencePort } from '../../control-plane/api/inference';
import type { RecordsPort } from '../../control-plane/api/records';
import { DeploymentEngines } from '../../control-plane/api/startup';
import { authenticate } from './authenticate';
import { attributeDeployment } from '../http/request-telemetry';
import { resolveDeploymentEndpoint } from './deployment-endpoint';
import { EmbeddingsRoute } from './embeddings.route';
import { ImagesRoute, type MediaRouteOptions } from './media/images.route';
import { RequestsRoute } from './media/requests.route';
import { VideosRoute } from './media/videos.route';
import { ModelsRoute } from './models.route';
import { BatchesRoute } from './batches/batches.route';
import { FilesRoute } from './batches/files.route';
import { StoredResponsesRoute } from './responses/responses.route';
import type { TextRouteOptions } from './text-completion.route';
import { decodePathSegment } from '../http/path-segment';
import { listSharedModels, retrieveSharedModel } from './shared-models.route';
import {
  endpointList, matchDeploymentEndpoint, matchSharedEndpoint, SHARED_BASE, sharedEndpointList, type DeploymentEndpointName, type SharedEndpointName,
} from './endpoint-table';
import type { RequestGate } from '../http/request-gate';
import type { ObjectDownloadOptions } from '../files/object-download';
import { workspaceRootRoute } from './workspace-root.route';
import { type EndpointHandler, idOf, json, modelOf, type RecordHandler } from './route-endpoints';
import { WorkspaceRouting } from './workspace-routing';

export type V1RouteOptions = TextRouteOptions & MediaRouteOptions & {
  downloads: ObjectDownloadOptions;
  /** The largest file `/files` takes (the control plane's `batches.filesMaxBytes`). */
  maxFileBytes: number;
};

/** `/d/<slug>/v1/<rest>`: each deployment's own OpenAI-compatible base URL. */
const DEPLOYMENT_PATH = /^\/d\/([a-z0-9-]{1,64})\/v1(\/.*)$/;
/** Any segment where the slug goes: one that cannot be a slug is refused (a NUL: 400) or unknown (404). */
const ANY_DEPLOYMENT_PATH = /^\/d\/([^/]+)\/v1\//;
/** The workspace base URL, `/v1/<rest>`: the deployment is the body's `model` (workspace-root.route.ts). */
const WORKSPACE_PATH = /^\/v1(\/.*)?$/;

/**
 * The `/d/<slug>/v1`, `/v1` and `/shared/v1` surfaces but for the endpoints the fast lane (text-fast-lane.ts) answers
 * before Koa. Endpoints are matched against endpoint-table.ts; auth runs before the deployment lookup. It takes the
 * inference port (the request path) and the records port (media requests, batches and files, stored responses).
 */
export function v1Router(inference: InferencePort, records: RecordsPort, options: V1RouteOptions, gate: RequestGate) {
  const images = new ImagesRoute(inference, options);
  const videos = new VideosRoute(inference, options);
  const requests = new RequestsRoute(records);
  const embeddings = new EmbeddingsRoute(inference.pipeline, options);
  const models = new ModelsRoute(new DeploymentEngines(inference.replicas, inference.localProvider), inference.adapterDirectory);
  const files = new FilesRoute(records.batches, { maxFileBytes: options.maxFileBytes, downloads: options.downloads });
  const batches = new BatchesRoute(records.batches, { maxBodyBytes: options.maxBodyBytes });
  const responses = new StoredResponsesRoute(records.responses, records.backgroundResponses);
  // Each route declares the table endpoints it answers (route-endpoints.ts); chat and completions take the fast lane.
  const routes = [images, videos, requests, embeddings, models, files, batches, responses].map((route) => route.endpoints());
  const handlers: Partial<Record<DeploymentEndpointName, EndpointHandler>> = Object.assign({}, ...routes.map((route) => route.deployment));
  const recordHandlers: Partial<Record<DeploymentEndpointName, RecordHandler>> = Object.assign({}, ...routes.map((route) => route.records ?? {}));
  const shared = sharedHandlers(inference.shared, responses);
  const workspaceRoot = workspaceRootRoute(inference.apiKeys, new WorkspaceRouting(inference.deploymentStore, inference.adapterDirectory), models, handlers, recordHandlers, gate, options);

  /** The shared (per-token) endpoint, `/shared/v1<rest>`; its chat/completions and responses take the fast lane. */
  const sharedRoute = async (context: Context, rest: string): Promise<void> => {
    const key = await authenticate(inference.apiKeys, context.get('authorization') || undefined);
    gate.enter(context.req, context.res, key);
    const found = matchSharedEndpoint(context.method, rest);
    const handler = found ? shared[found.endpoint.name] : undefined;
    if (!found || !handler) {
      throw new AppError('not_found', `${context.method} ${SHARED_BASE}${shortened(rest)} is not an endpoint of the shared endpoint; available: ${sharedEndpointList()}`);
    }
    return await handler(context, key, found.param);
  };

  return async (context: Context, next: Next): Promise<void> => {
    const path = context.path;
    const match = DEPLOYMENT_PATH.exec(path);
    if (!match) {
      const other = ANY_DEPLOYMENT_PATH.exec(path);
      if (other) {
        await authenticate(inference.apiKeys, context.get('authorization') || undefined);
        const slug = decodePathSegment(other[1], 'slug');
        throw new AppError('deployment_not_found', `no deployment endpoint at /d/${shortened(slug)}/v1: slugs are 1-64 lowercase letters, digits and "-"`);
      }
      const workspace = WORKSPACE_PATH.exec(path);
      if (workspace) return await workspaceRoot(context, workspace[1] ?? '');
      if (path === SHARED_BASE || path.startsWith(`${SHARED_BASE}/`)) return await sharedRoute(context, path.slice(SHARED_BASE.length));
      return await next();
    }
    const { key, deployment } = await resolveDeploymentEndpoint(inference, match[1], context.get('authorization') || undefined);
    attributeDeployment(context, deployment.id);
    const rest = match[2];
    const found = matchDeploymentEndpoint(context.method, rest);
    const handler = found ? handlers[found.endpoint.name] : undefined;
    if (!found || !handler) throw unknownRoute(context.method, rest, deployment);
    context.state.requestBudget = gate.enter(context.req, context.res, key, deployment, found.endpoint.spends);
    if (found.endpoint.tenantList) return await inference.tenantQueries.run(async () => await handler(context, deployment, key, found.param));
    return await handler(context, deployment, key, found.param);
  };
}

/** A shared-table endpoint's handler: the guest's key and the path's `{id}` or `{model}`, still percent-encoded. */
type SharedHandler = (context: Context, key: AuthenticatedKey, param: string | undefined) => Promise<void> | void;

/**
 * The handler of every shared-table endpoint Koa serves (chat and responses take the fast
 * lane): the shared models (the id `shared/<model-id>`), and a guest's stored responses.
 */
function sharedHandlers(shared: InferencePort['shared'], responses: StoredResponsesRoute): Partial<Record<SharedEndpointName, SharedHandler>> {
  return {
    'models.list': (context) => json(context, listSharedModels(shared)),
    'models.retrieve': (context, _key, param) => json(context, retrieveSharedModel(shared, modelOf(param))),
    'responses.retrieve': (context, key, param) => responses.retrieve(context, 'shared', key, idOf(param)),
    'responses.delete': (context, key, param) => responses.delete(context, 'shared', key, idOf(param)),
    'responses.input_items': (context, key, param) => responses.inputItems(context, 'shared', key, idOf(param)),
  };
}

function unknownRoute(method: string, rest: string, deployment: Deployment): AppError {
  return new AppError('not_found', `${method} /v1${shortened(rest)} is not an endpoint of this deployment (${deployment.modelId}); available: ${endpointList()}`);
}
