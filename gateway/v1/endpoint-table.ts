import { type CatalogModel, INFERENCE_ENDPOINTS, type InferenceEndpointName } from '../../control-plane/api/inference';

/**
 * Every endpoint of a deployment's `/v1`, and of the shared endpoint's `/shared/v1`, declared
 * once. The routers, the fast lane, metric labels, the 404 messages and the OpenAPI document
 * all read these tables, so adding an endpoint is one row here and its handler (route knowledge
 * used to live in four files that had to agree). An inference endpoint's row starts from the
 * control plane's (control-plane/openai/inference-endpoints.ts: its name, method, path and the
 * tasks that answer it, which the "this deployment serves …" messages read), so adding one is
 * a row there too.
 */
export interface Endpoint<Name extends string> {
  readonly name: Name;
  readonly method: 'GET' | 'POST' | 'DELETE';
  /** Under its base URL; `{id}` is one path segment, `{model}` the rest of the path (ids hold slashes). */
  readonly path: string;
  /** The metrics `route` label (a closed set: dashboards depend on it). */
  readonly label: EndpointLabel;
  /** Answered on node:http in front of Koa (text-fast-lane.ts). */
  readonly fastLane?: boolean;
}

/**
 * The metrics `route` labels the tables give: their rows' and `v1.other` (any other path under
 * `/v1`). gateway/route-label.ts adds those of the other surfaces to make ROUTE_LABELS.
 */
export type EndpointLabel =
  | 'chat.completions' | 'completions' | 'responses' | 'embeddings' | 'models' | 'images.generations' | 'images.edits'
  | 'videos' | 'videos.retrieve' | 'requests' | 'batch.files' | 'batches' | 'shared' | 'v1.other';

/** An endpoint of a deployment's `/v1` (`/d/<slug>/v1`, and the workspace's `/v1` where routed by `model`). */
export interface DeploymentEndpoint extends Endpoint<DeploymentEndpointName> {
  /**
   * Catalog tasks whose deployments answer it; absent: every deployment (listing, records). Only
   * the inference endpoints have them, and they are the control plane's rows, taken whole
   * (control-plane/openai/inference-endpoints.ts).
   */
  readonly tasks?: readonly CatalogModel['task'][];
  /** It runs work the workspace pays for: credit, a paused deployment and (text) rate limits are checked before its body is read. */
  readonly spends?: 'text' | 'media';
  /**
   * Lists a workspace's records: its queries run as the tenant's (the tenant pool, with its
   * statement timeout: control-plane/database/tenant-queries.ts).
   */
  readonly tenantList?: true;
}

export type DeploymentEndpointName =
  | InferenceEndpointName | 'models.list' | 'models.retrieve'
  | 'videos.list' | 'videos.retrieve' | 'videos.content' | 'videos.cancel' | 'requests.list' | 'requests.retrieve' | 'requests.cancel'
  | 'files.create' | 'files.list' | 'files.retrieve' | 'files.content' | 'files.delete'
  | 'batches.create' | 'batches.list' | 'batches.retrieve' | 'batches.cancel'
  | 'responses.retrieve' | 'responses.delete' | 'responses.input_items' | 'responses.cancel';

export const DEPLOYMENT_ENDPOINTS: readonly DeploymentEndpoint[] = [
  // The inference endpoints' name, method, path and tasks are the control plane's (INFERENCE_ENDPOINTS).
  { ...INFERENCE_ENDPOINTS['chat.completions'], label: 'chat.completions', fastLane: true, spends: 'text' },
  { ...INFERENCE_ENDPOINTS.completions, label: 'completions', fastLane: true, spends: 'text' },
  { ...INFERENCE_ENDPOINTS['responses.create'], label: 'responses', fastLane: true, spends: 'text' },
  { name: 'responses.retrieve', method: 'GET', path: '/responses/{id}', label: 'responses' },
  { name: 'responses.delete', method: 'DELETE', path: '/responses/{id}', label: 'responses' },
  { name: 'responses.input_items', method: 'GET', path: '/responses/{id}/input_items', label: 'responses' },
  { name: 'responses.cancel', method: 'POST', path: '/responses/{id}/cancel', label: 'responses' },
  { ...INFERENCE_ENDPOINTS.embeddings, label: 'embeddings', spends: 'text' },
  { name: 'models.list', method: 'GET', path: '/models', label: 'models' },
  { name: 'models.retrieve', method: 'GET', path: '/models/{model}', label: 'models' },
  { ...INFERENCE_ENDPOINTS['images.generations'], label: 'images.generations', spends: 'media' },
  { ...INFERENCE_ENDPOINTS['images.edits'], label: 'images.edits', spends: 'media' },
  { ...INFERENCE_ENDPOINTS['videos.create'], label: 'videos', spends: 'media' },
  { ...INFERENCE_ENDPOINTS['videos.generations'], label: 'videos', spends: 'media' },
  { name: 'videos.list', method: 'GET', path: '/videos', label: 'videos.retrieve', tenantList: true },
  { name: 'videos.retrieve', method: 'GET', path: '/videos/{id}', label: 'videos.retrieve' },
  { name: 'videos.content', method: 'GET', path: '/videos/{id}/content', label: 'videos.retrieve' },
  { name: 'videos.cancel', method: 'POST', path: '/videos/{id}/cancel', label: 'videos.retrieve' },
  { name: 'requests.list', method: 'GET', path: '/requests', label: 'requests', tenantList: true },
  { name: 'requests.retrieve', method: 'GET', path: '/requests/{id}', label: 'requests' },
  { name: 'requests.cancel', method: 'POST', path: '/requests/{id}/cancel', label: 'requests' },
  // The Batch API (docs/batches.md). No `tasks`: they are not inference endpoints (the served-endpoint
  // messages leave them out); a batch names its endpoint, checked against the model when it is created.
  { name: 'files.create', method: 'POST', path: '/files', label: 'batch.files' },
  { name: 'files.list', method: 'GET', path: '/files', label: 'batch.files', tenantList: true },
  { name: 'files.retrieve', method: 'GET', path: '/files/{id}', label: 'batch.files' },
  { name: 'files.content', method: 'GET', path: '/files/{id}/content', label: 'batch.files' },
  { name: 'files.delete', method: 'DELETE', path: '/files/{id}', label: 'batch.files' },
  { name: 'batches.create', method: 'POST', path: '/batches', label: 'batches' },
  { name: 'batches.list', method: 'GET', path: '/batches', label: 'batches', tenantList: true },
  { name: 'batches.retrieve', method: 'GET', path: '/batches/{id}', label: 'batches' },
  { name: 'batches.cancel', method: 'POST', path: '/batches/{id}/cancel', label: 'batches' },
];

/**
 * The shared (guest) endpoint, `/shared/v1`: shared models paid per token
 * (docs/shared-serving.md). Its Koa requests are all one `route` label, `shared` (the fast
 * lane labels its chat and responses calls by their text endpoint and the shared model, as it
 * does an owner's); by-id responses are the guest's own (StoredResponsesRoute, scope `shared`).
 */
export const SHARED_BASE = '/shared/v1';

export type SharedEndpointName =
  | 'chat.completions' | 'responses.create' | 'responses.retrieve' | 'responses.delete' | 'responses.input_items'
  | 'models.list' | 'models.retrieve';

export const SHARED_ENDPOINTS: readonly Endpoint<SharedEndpointName>[] = [
  { name: 'chat.completions', method: 'POST', path: '/chat/completions', label: 'shared', fastLane: true },
  { name: 'responses.create', method: 'POST', path: '/responses', label: 'shared', fastLane: true },
  { name: 'responses.retrieve', method: 'GET', path: '/responses/{id}', label: 'shared' },
  { name: 'responses.delete', method: 'DELETE', path: '/responses/{id}', label: 'shared' },
  { name: 'responses.input_items', method: 'GET', path: '/responses/{id}/input_items', label: 'shared' },
  { name: 'models.list', method: 'GET', path: '/models', label: 'shared' },
  // The id is `shared/<model-id>`: the rest of the path, slashes raw or percent-encoded.
  { name: 'models.retrieve', method: 'GET', path: '/models/{model}', label: 'shared' },
];

interface CompiledEndpoint<E extends Endpoint<string>> {
  readonly endpoint: E;
  readonly pattern: RegExp;
}

function compile<E extends Endpoint<string>>(endpoints: readonly E[]): readonly CompiledEndpoint<E>[] {
  return endpoints.map((endpoint) => ({
    endpoint,
    pattern: new RegExp(`^${endpoint.path.replace(/\//g, '\\/').replace('{id}', '([^/]+)').replace('{model}', '(.+)')}$`),
  }));
}

/** The label of a path under `/v1` that no row has, and of one under `/shared/v1` (every shared row's too). */
const OTHER_V1_LABEL = 'v1.other';
const SHARED_LABEL = 'shared';

/** Every label the tables give, for the metrics' closed set (gateway/route-label.ts ROUTE_LABELS). */
export const ENDPOINT_LABELS: readonly EndpointLabel[] = [
  ...new Set<EndpointLabel>([...[...DEPLOYMENT_ENDPOINTS, ...SHARED_ENDPOINTS].map((endpoint) => endpoint.label), OTHER_V1_LABEL, SHARED_LABEL]),
];

const DEPLOYMENT_COMPILED = compile(DEPLOYMENT_ENDPOINTS);
const SHARED_COMPILED = compile(SHARED_ENDPOINTS);

export interface EndpointMatch<E extends Endpoint<string> = DeploymentEndpoint> {
  readonly endpoint: E;
  /** The `{id}` or `{model}` of the path, still percent-encoded. */
  readonly param: string | undefined;
}

function match<E extends Endpoint<string>>(compiled: readonly CompiledEndpoint<E>[], method: string, rest: string): EndpointMatch<E> | null {
  for (const { endpoint, pattern } of compiled) {
    if (endpoint.method !== method) continue;
    const found = pattern.exec(rest);
    if (found) return { endpoint, param: found[1] };
  }
  return null;
}

/** The label of `rest`: the endpoint's with that method, else any endpoint's at that path, else `fallback`. */
function label(compiled: readonly CompiledEndpoint<Endpoint<string>>[], method: string, rest: string, fallback: EndpointLabel): EndpointLabel {
  let found: EndpointLabel | null = null;
  for (const { endpoint, pattern } of compiled) {
    if (!pattern.test(rest)) continue;
    if (endpoint.method === method) return endpoint.label;
    found ??= endpoint.label;
  }
  return found ?? fallback;
}

/** The endpoint `method` + `rest` (the path after `/v1`) names, or null. */
export function matchDeploymentEndpoint(method: string, rest: string): EndpointMatch | null {
  return match(DEPLOYMENT_COMPILED, method, rest);
}

/** The shared endpoint `method` + `rest` (the path after `/shared/v1`) names, or null. */
export function matchSharedEndpoint(method: string, rest: string): EndpointMatch<Endpoint<SharedEndpointName>> | null {
  return match(SHARED_COMPILED, method, rest);
}

/** The metrics label of a path under `/v1`: the endpoint's with that method, else any endpoint's at that path, else `v1.other`. */
export function deploymentRouteLabel(method: string, rest: string): EndpointLabel {
  return label(DEPLOYMENT_COMPILED, method, rest, OTHER_V1_LABEL);
}

/** The metrics label of a path under `/shared/v1`, chosen as deploymentRouteLabel's; anything else there is `shared` too. */
export function sharedRouteLabel(method: string, rest: string): EndpointLabel {
  return label(SHARED_COMPILED, method, rest, SHARED_LABEL);
}

const fastLaneAlternatives = (endpoints: readonly Endpoint<string>[]): string =>
  endpoints.filter((endpoint) => endpoint.fastLane).map((endpoint) => endpoint.path.slice(1).replace(/\//g, '\\/')).join('|');

/** The fast lane's path under `/d/<slug>/v1`: its endpoints' paths, captured. */
export function fastLanePaths(): RegExp {
  return new RegExp(`^\\/d\\/([a-z0-9-]{1,64})\\/v1\\/(${fastLaneAlternatives(DEPLOYMENT_ENDPOINTS)})(?:\\?|$)`);
}

/** The fast lane's path under the workspace base URL `/v1`: its endpoints' paths, captured. */
export function workspaceFastLanePaths(): RegExp {
  return new RegExp(`^\\/v1\\/(${fastLaneAlternatives(DEPLOYMENT_ENDPOINTS)})(?:\\?|$)`);
}

const SHARED_FAST_LANE_PATH = new RegExp(`^${SHARED_BASE.replace(/\//g, '\\/')}\\/(${fastLaneAlternatives(SHARED_ENDPOINTS)})(?:\\?|$)`);
const SHARED_FAST_LANE_NAMES = new Map(SHARED_ENDPOINTS.filter((endpoint) => endpoint.fastLane).map((endpoint) => [endpoint.path.slice(1), endpoint.name]));

/** The shared fast-lane endpoint a request URL (path and query) names, or undefined. */
export function sharedFastLaneEndpoint(url: string): SharedEndpointName | undefined {
  const found = SHARED_FAST_LANE_PATH.exec(url);
  return found ? SHARED_FAST_LANE_NAMES.get(found[1]) : undefined;
}

/**
 * Whether the workspace base URL (`/v1/…`) serves `endpoint`, picking the deployment by the
 * body's `model`: the inference endpoints (they have `tasks`) that take a body and name no
 * record in their path. Listing endpoints stay on the deployment's own URL (a GET has no
 * `model`); by-id ones are on `/v1` only where their handler needs no deployment
 * (workspace-root.route.ts, its record handlers).
 */
export function routesByModel(endpoint: DeploymentEndpoint): boolean {
  return endpoint.method === 'POST' && endpoint.tasks !== undefined && !endpoint.path.includes('{');
}

/** Every endpoint, for a 404's message. */
export function endpointList(): string {
  return DEPLOYMENT_ENDPOINTS.map((endpoint) => `${endpoint.method} /v1${endpoint.path}`).join(', ');
}

/** Every shared endpoint, for a 404's message. */
export function sharedEndpointList(): string {
  return SHARED_ENDPOINTS.map((endpoint) => `${endpoint.method} ${SHARED_BASE}${endpoint.path}`).join(', ');
}
