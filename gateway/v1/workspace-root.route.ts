import type { Context } from 'koa';
import { AppError, shortened } from '../../control-plane/api/errors';
import type { AuthenticatedKey, Deployment, InferencePort } from '../../control-plane/api/inference';
import { isMultipart, readMultipart } from '../http/multipart';
import { readBody } from '../http/read-body';
import type { RequestGate } from '../http/request-gate';
import { decodePathSegment } from '../http/path-segment';
import { attributeDeployment } from '../http/request-telemetry';
import { setRoutedBody } from '../http/routed-body';
import { authenticate } from './authenticate';
import { DEPLOYMENT_ENDPOINTS, matchDeploymentEndpoint, routesByModel, type DeploymentEndpointName } from './endpoint-table';
import type { ModelsRoute } from './models.route';
import type { WorkspaceRouting } from './workspace-routing';
import type { EndpointHandler, RecordHandler } from './route-endpoints';

export type { EndpointHandler, RecordHandler } from './route-endpoints';

/** The endpoints a LoRA adapter's name may be sent to (docs/adapters.md#addressing). */
const ADAPTER_ENDPOINTS: ReadonlySet<string> = new Set(['chat.completions', 'completions', 'responses.create']);

export interface WorkspaceRootOptions {
  /** A JSON body's limit (the deployment endpoints' MAX_BODY_BYTES). */
  readonly maxBodyBytes: number;
  /** A multipart body's limit (media uploads: images/edits, videos). */
  readonly maxMediaBodyBytes: number;
}

/**
 * The workspace base URL, `/v1/<rest>` (chat/completions and completions take the fast lane
 * before Koa, text-fast-lane.ts): `GET /v1/models[/{model}]` lists the key's workspace's
 * deployments, and every inference endpoint of the table (endpoint-table.ts `routesByModel`)
 * picks its deployment by the body's `model`, then runs the deployment's own handler: limits,
 * records, billing, metrics and logs are those of `/d/<slug>/v1`. By-id endpoints whose records
 * are found by the workspace and id alone (`recordHandlers`: an async image's request record, a
 * video) are answered too, so a client that submitted on `/v1` can poll there; listings and
 * Batch API records stay on the deployment's URL.
 *
 * The request budget is entered before the body is read, as on the deployment's URL, without
 * the deployment (not known until the body says); what the deployment alone refuses (paused)
 * is checked once it is known, before its handler runs (RequestGate.routed). The body is read
 * once: the handler takes it from routed-body.ts.
 */
export function workspaceRootRoute(
  apiKeys: InferencePort['apiKeys'], routing: WorkspaceRouting, models: ModelsRoute, handlers: Partial<Record<DeploymentEndpointName, EndpointHandler>>,
  recordHandlers: Partial<Record<DeploymentEndpointName, RecordHandler>>, gate: RequestGate, options: WorkspaceRootOptions,
) {
  const served = DEPLOYMENT_ENDPOINTS.filter((endpoint) => (routesByModel(endpoint) && handlers[endpoint.name]) || recordHandlers[endpoint.name]);
  const available = ['GET /v1/models', 'GET /v1/models/{model}', ...served.map((endpoint) => `${endpoint.method} /v1${endpoint.path}`)].join(', ');
  return async (context: Context, rest: string): Promise<void> => {
    const key = await authenticate(apiKeys, context.get('authorization') || undefined);
    if (context.method === 'GET' && rest === '/models') {
      context.state.requestBudget = gate.enter(context.req, context.res, key);
      return json(context, await models.workspaceList(key.workspaceId, await routing.deploymentsOf(key)));
    }
    if (context.method === 'GET' && rest.startsWith('/models/')) {
      context.state.requestBudget = gate.enter(context.req, context.res, key);
      const deployment = await routing.find(key, decodePathSegment(rest.slice('/models/'.length), 'model'));
      attributeDeployment(context, deployment.id);
      return json(context, await models.workspaceModel(deployment));
    }
    const found = matchDeploymentEndpoint(context.method, rest);
    const recordHandler = found && found.param !== undefined ? recordHandlers[found.endpoint.name] : undefined;
    if (found && recordHandler) {
      context.state.requestBudget = gate.enter(context.req, context.res, key);
      return await recordHandler(context, key, found.param!);
    }
    const handler = found && routesByModel(found.endpoint) ? handlers[found.endpoint.name] : undefined;
    if (!found || !handler) {
      throw new AppError('not_found', `${context.method} /v1${shortened(rest)} is not an endpoint of the workspace base URL; available: ${available}`
        + `; every endpoint of a deployment is at /d/<slug>/v1 (GET /v1/models lists the slugs)`);
    }
    const spends = found.endpoint.spends;
    const held = gate.enter(context.req, context.res, key, null, spends);
    context.state.requestBudget = held;
    let deployment: Deployment;
    // Media endpoints take multipart forms (media-body.ts); every other endpoint reads JSON, so a
    // form sent to one is read as its JSON (and refused there), never as a form its handler would not take.
    if (spends === 'media' && isMultipart(context.req)) {
      const form = await readMultipart(context.req, options.maxMediaBodyBytes, held);
      deployment = await routing.routeForm(key, form);
      setRoutedBody(context.req, form);
    } else {
      const routed = await routing.routeJson(key, await readBody(context.req, options.maxBodyBytes, held), ADAPTER_ENDPOINTS.has(found.endpoint.name));
      deployment = routed.deployment;
      setRoutedBody(context.req, routed.body);
    }
    attributeDeployment(context, deployment.id);
    gate.routed(context.req, key, deployment, spends);
    await handler(context, deployment, key, undefined);
  };
}

function json(context: Context, body: unknown): void {
  context.status = 200;
  context.body = body;
}
