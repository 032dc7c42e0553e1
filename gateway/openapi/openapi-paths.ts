import { MAX_FILE_LIST_LIMIT as MAX_LIST_LIMIT } from '../../control-plane/api/records';
import type { DeploymentEndpointName, SharedEndpointName } from '../v1/endpoint-table';
import { errors } from './error-responses';
import { ref, type JsonObject } from './schema-helpers';

/** An operation of the document: its `operationId` is the endpoint's name in endpoint-table.ts (the test pairs them by it). */
export interface Operation {
  readonly summary: string;
  readonly tags: readonly string[];
  readonly description?: string;
  readonly parameters?: readonly JsonObject[];
  readonly requestBody?: JsonObject;
  readonly responses: Record<string, JsonObject>;
  readonly security?: readonly JsonObject[];
}

const json = (schema: JsonObject, description: string, headers?: JsonObject): JsonObject => ({
  description, ...(headers ? { headers } : {}), content: { 'application/json': { schema } },
});
const jsonBody = (schema: string): JsonObject => ({ required: true, content: { 'application/json': { schema: ref(schema) } } });
const formBody = (schema: string): JsonObject => ({ required: true, content: { 'multipart/form-data': { schema: ref(schema) } } });
const parameter = (name: string): JsonObject => ({ $ref: `#/components/parameters/${name}` });
const query = (name: string, schema: JsonObject, description: string): JsonObject => ({ name, in: 'query', required: false, schema, description });

/** The rate-limit headers of an admitted text call (gateway/http/rate-limit-headers.ts), by their names in `components.headers`. */
export const RATE_LIMIT_HEADER_NAMES = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'x-ratelimit-limit-requests',
  'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests', 'X-RateLimit-Limit-Tokens', 'X-RateLimit-Remaining-Tokens', 'X-RateLimit-Reset-Tokens'] as const;
const RATE_LIMIT_HEADERS = Object.fromEntries(RATE_LIMIT_HEADER_NAMES.map((name) => [name, { $ref: `#/components/headers/${name}` }]));

/**
 * A text answer: JSON, or with `stream: true` server-sent events. OpenAPI 3.1 cannot type the
 * events of a stream; `x-itemSchema` (3.2's `itemSchema`) is the schema of each `data:` line.
 */
const textAnswer = (object: string, event: string): JsonObject => ({
  description: `\`${object}\`; with \`stream: true\`, SSE events each holding one ${event} on its \`data:\` line, then \`data: [DONE]\`.`,
  headers: RATE_LIMIT_HEADERS,
  content: {
    'application/json': { schema: ref(object) },
    'text/event-stream': { schema: { type: 'string' }, 'x-itemSchema': ref(event) },
  },
});

/** A Responses answer: the Response object, or with `stream: true` its typed events (no `[DONE]`: the last event says it ended). */
const responseAnswer: JsonObject = {
  description: 'The `Response`; with `stream: true`, SSE events (`event: <type>` and `data:` holding the event), ending with '
    + '`response.completed`, `response.incomplete`, `response.failed` or `error`.',
  headers: RATE_LIMIT_HEADERS,
  content: {
    'application/json': { schema: ref('Response') },
    'text/event-stream': { schema: { type: 'string' }, 'x-itemSchema': ref('ResponseStreamEvent'), 'x-streamEnd': ['response.completed', 'response.incomplete', 'response.failed', 'error'] },
  },
};
const ITEMS_ORDER = query('order', { enum: ['asc', 'desc'] }, 'desc by default');
const RETRIEVE_STREAM = query('stream', { type: 'string' }, '`true` (a replay as events) is refused: 400');

const ASYNC = query('async', { type: 'string', enum: ['true', 'false', '1', '0'] }, '`true`: answer 202 at once with a request record');
const LIMIT = (max: number, fallback: number) => query('limit', { type: 'integer', minimum: 1, maximum: max }, `at most ${max}; ${fallback} by default`);
const AFTER = query('after', { type: 'string' }, 'an id of this list: the page after it');
const SPEND = [402, 429, 503] as const;

/** Every endpoint of a deployment's `/v1`, by its endpoint-table name; paths are under `/d/{slug}/v1`. */
export const DEPLOYMENT_OPERATIONS: Record<DeploymentEndpointName, Operation> = {
  'chat.completions': {
    summary: 'Create a chat completion', tags: ['text'], requestBody: jsonBody('ChatCompletionRequest'),
    responses: { 200: textAnswer('ChatCompletion', 'ChatCompletionStreamEvent'), ...errors(400, 401, ...SPEND, 404, 413, 502, 504) },
  },
  completions: {
    summary: 'Create a text completion', tags: ['text'], requestBody: jsonBody('CompletionRequest'),
    responses: { 200: textAnswer('TextCompletion', 'TextCompletionStreamEvent'), ...errors(400, 401, ...SPEND, 404, 413, 502, 504) },
  },
  'responses.create': {
    summary: 'Create a model response', tags: ['responses'], requestBody: jsonBody('ResponsesRequest'),
    description: 'Runs as chat through the same pipeline (docs/api-contract.md#responses-api); stored unless `store: false`.',
    responses: { 200: responseAnswer, ...errors(400, 401, ...SPEND, 404, 413, 502, 504) },
  },
  'responses.retrieve': {
    summary: 'Retrieve a stored response', tags: ['responses'], parameters: [parameter('Id'), RETRIEVE_STREAM],
    responses: { 200: json(ref('Response'), 'The response as stored.'), ...errors(400, 401, 404) },
  },
  'responses.delete': {
    summary: 'Delete a stored response', tags: ['responses'], parameters: [parameter('Id')],
    responses: { 200: json(ref('ResponseDeleted'), 'Deleted.'), ...errors(401, 404) },
  },
  'responses.input_items': {
    summary: 'List a response\'s input items', tags: ['responses'], parameters: [parameter('Id'), LIMIT(100, 20), ITEMS_ORDER, query('after', { type: 'string' }, 'an item id: the page after it')],
    responses: { 200: json(ref('ResponseInputItemList'), 'This response\'s own input items (not its chain\'s).'), ...errors(400, 401, 404) },
  },
  embeddings: {
    summary: 'Create embeddings', tags: ['text'], requestBody: jsonBody('EmbeddingRequest'),
    responses: { 200: json(ref('EmbeddingList'), 'The vectors, in input order.', RATE_LIMIT_HEADERS), ...errors(400, 401, ...SPEND, 404, 413, 502, 504) },
  },
  'models.list': { summary: 'List the endpoint\'s model', tags: ['models'], responses: { 200: json(ref('ModelList'), 'The one model.'), ...errors(401, 404) } },
  'models.retrieve': {
    summary: 'Retrieve the endpoint\'s model', tags: ['models'], parameters: [parameter('Model')],
    responses: { 200: json(ref('Model'), 'The model.'), ...errors(400, 401, 404) },
  },
  'images.generations': {
    summary: 'Generate images', tags: ['images'], parameters: [ASYNC, parameter('IdempotencyKey')], requestBody: jsonBody('ImageGenerationRequest'),
    responses: {
      200: json(ref('ImagesResponse'), 'The images, within the 30 s budget.'), 202: json(ref('RequestAcknowledgement'), 'With `?async=true`: queued.'),
      ...errors(400, 401, ...SPEND, 404, 413, 422, 502, 504),
    },
  },
  'images.edits': {
    summary: 'Edit an image', tags: ['images'], parameters: [ASYNC, parameter('IdempotencyKey')], requestBody: formBody('ImageEditRequest'),
    responses: {
      200: json(ref('ImagesResponse'), 'The images, within the 30 s budget.'), 202: json(ref('RequestAcknowledgement'), 'With `?async=true`: queued.'),
      ...errors(400, 401, ...SPEND, 404, 413, 422, 502, 504),
    },
  },
  'videos.create': {
    summary: 'Create a video (OpenAI\'s shape)', tags: ['videos'], parameters: [parameter('IdempotencyKey')], requestBody: formBody('VideoCreateRequest'),
    responses: { 202: json(ref('Video'), 'Queued.'), ...errors(400, 401, ...SPEND, 404, 413, 422) },
  },
  'videos.generations': {
    summary: 'Create a video from JSON (text-to-video)', tags: ['videos'], parameters: [parameter('IdempotencyKey')], requestBody: jsonBody('VideoGenerationRequest'),
    responses: { 202: json(ref('RequestAcknowledgement'), 'Queued.'), ...errors(400, 401, ...SPEND, 404, 413, 422) },
  },
  'videos.list': {
    summary: 'List the deployment\'s videos', tags: ['videos'], parameters: [LIMIT(100, 20)],
    responses: { 200: json(ref('VideoList'), 'Newest first.'), ...errors(400, 401, 404) },
  },
  'videos.retrieve': { summary: 'Retrieve a video', tags: ['videos'], parameters: [parameter('Id')], responses: { 200: json(ref('Video'), 'The video.'), ...errors(401, 403, 404) } },
  'videos.content': {
    summary: 'Download a video', tags: ['videos'], parameters: [parameter('Id'), query('variant', { const: 'video' }, 'only `video`')],
    responses: {
      302: {
        description: 'To a download link valid ~1 h, in `Location`; the body is a line naming the link (HTML when the client accepts it).',
        headers: { Location: { required: true, schema: { type: 'string' } } },
        content: { 'text/html': { schema: { type: 'string' } }, 'text/plain': { schema: { type: 'string' } } },
      },
      ...errors(400, 401, 403, 404, 409),
    },
  },
  'videos.cancel': {
    summary: 'Cancel a video', tags: ['videos'], parameters: [parameter('Id')],
    responses: { 204: { description: 'Canceled while queued, or nothing done once finished.' }, ...errors(401, 403, 404, 409) },
  },
  'requests.list': {
    summary: 'List the deployment\'s request records', tags: ['requests'],
    parameters: [query('status', { type: 'string' }, 'only records in this status'), LIMIT(200, 50)],
    responses: { 200: json(ref('RequestList'), 'Newest first.'), ...errors(400, 401, 404) },
  },
  'requests.retrieve': {
    summary: 'Retrieve a request record', tags: ['requests'], parameters: [parameter('Id')],
    responses: { 200: json(ref('RequestRecord'), 'The record; `output_urls` once succeeded.'), ...errors(401, 403, 404) },
  },
  'requests.cancel': {
    summary: 'Cancel a queued request', tags: ['requests'], parameters: [parameter('Id')],
    responses: { 200: json(ref('RequestRecord'), 'The canceled record.'), ...errors(401, 403, 404, 409) },
  },
  'files.create': {
    summary: 'Upload a batch input file', tags: ['batches'], requestBody: formBody('FileUploadRequest'),
    responses: { 200: json(ref('File'), 'The stored file.'), ...errors(400, 401, 404, 413) },
  },
  'files.list': {
    summary: 'List files', tags: ['batches'],
    parameters: [query('purpose', { type: 'string' }, 'only files of this purpose'), AFTER, LIMIT(MAX_LIST_LIMIT, MAX_LIST_LIMIT), query('order', { enum: ['asc', 'desc'] }, 'by creation; desc by default')],
    responses: { 200: json(ref('FileList'), 'A cursor page.'), ...errors(400, 401, 404) },
  },
  'files.retrieve': { summary: 'Retrieve a file', tags: ['batches'], parameters: [parameter('Id')], responses: { 200: json(ref('File'), 'The file.'), ...errors(401, 404) } },
  'files.content': {
    summary: 'Download a file\'s content', tags: ['batches'], parameters: [parameter('Id')],
    responses: {
      200: {
        description: 'The bytes as stored: JSONL for batch files, application/octet-stream for user_data files.',
        content: { 'application/jsonl': { schema: { type: 'string' } }, 'application/octet-stream': { schema: { type: 'string' } } },
      },
      ...errors(401, 404),
    },
  },
  'files.delete': {
    summary: 'Delete a file', tags: ['batches'], parameters: [parameter('Id')],
    responses: { 200: json(ref('FileDeleted'), 'Deleted.'), ...errors(401, 404) },
  },
  'batches.create': {
    summary: 'Create a batch', tags: ['batches'], requestBody: jsonBody('BatchCreateRequest'),
    responses: { 200: json(ref('Batch'), 'The batch, validating.'), ...errors(400, 401, 404, 413) },
  },
  'batches.list': {
    summary: 'List batches', tags: ['batches'], parameters: [AFTER, LIMIT(100, 20)],
    responses: { 200: json(ref('BatchList'), 'Newest first.'), ...errors(400, 401, 404) },
  },
  'batches.retrieve': { summary: 'Retrieve a batch', tags: ['batches'], parameters: [parameter('Id')], responses: { 200: json(ref('Batch'), 'The batch.'), ...errors(401, 404) } },
  'batches.cancel': {
    summary: 'Cancel a batch', tags: ['batches'], parameters: [parameter('Id')],
    responses: { 200: json(ref('Batch'), 'The batch, cancelling or cancelled.'), ...errors(401, 404, 409) },
  },
  'responses.cancel': {
    summary: 'Cancel a background response', tags: ['responses'], parameters: [parameter('Id')],
    responses: { 200: json(ref('Response'), 'The response, cancelled.'), ...errors(400, 401, 404) },
  },
};

/** An operation of no endpoint table (the workspace's own listing): its path under its base, method and operationId. */
export interface PlacedOperation {
  readonly path: string;
  readonly method: 'get' | 'post' | 'delete';
  readonly operationId: string;
  readonly operation: Operation;
}

/** Every endpoint of the shared (guest) endpoint, by its name in endpoint-table.ts SHARED_ENDPOINTS; its operationId is `shared.<name>`. */
export const SHARED_OPERATIONS: Record<SharedEndpointName, Operation> = {
  'chat.completions': {
    summary: 'Create a chat completion on a shared model', tags: ['shared'], requestBody: jsonBody('SharedChatCompletionRequest'),
    description: 'Paid per 1M input and output tokens from the guest workspace\'s credit (docs/api-contract.md#shared-endpoint).',
    responses: { 200: textAnswer('ChatCompletion', 'ChatCompletionStreamEvent'), ...errors(400, 401, 402, 404, 413, 429, 503) },
  },
  'responses.create': {
    summary: 'Create a model response on a shared model', tags: ['shared'], requestBody: jsonBody('SharedResponsesRequest'),
    description: 'A guest\'s turn, paid per token as shared chat; stored under the guest\'s workspace and the shared model.',
    responses: { 200: responseAnswer, ...errors(400, 401, 402, 404, 413, 429, 502, 503, 504) },
  },
  'responses.retrieve': { ...DEPLOYMENT_OPERATIONS['responses.retrieve'], tags: ['shared'], summary: 'Retrieve a guest\'s stored response' },
  'responses.delete': { ...DEPLOYMENT_OPERATIONS['responses.delete'], tags: ['shared'], summary: 'Delete a guest\'s stored response' },
  'responses.input_items': { ...DEPLOYMENT_OPERATIONS['responses.input_items'], tags: ['shared'], summary: 'List a guest\'s response\'s input items' },
  'models.list': { summary: 'List the shared models', tags: ['shared'], responses: { 200: json(ref('SharedModelList'), 'Every shared model, with prices and availability.'), ...errors(401) } },
  'models.retrieve': {
    summary: 'Retrieve a shared model', tags: ['shared'], parameters: [parameter('Model')],
    responses: { 200: json(ref('SharedModel'), 'The shared model.'), ...errors(400, 401, 404) },
  },
};

/**
 * The by-id endpoints the workspace base URL answers from the key's workspace and the id alone
 * (gateway/v1/v1-router.ts recordHandlers), so a client that submitted on `/v1` polls there.
 */
export const WORKSPACE_RECORD_ENDPOINTS: readonly DeploymentEndpointName[] = [
  'videos.retrieve', 'videos.content', 'videos.cancel', 'requests.retrieve', 'requests.cancel',
  'responses.retrieve', 'responses.delete', 'responses.input_items', 'responses.cancel',
];

const ROUTED_BY_MODEL = 'On the workspace base URL the body\'s `model` (required here) picks the deployment: its slug, or the model id of '
  + 'exactly one of the workspace\'s deployments; then it runs as on `/d/{slug}/v1` (docs/api-contract.md#base-urls).';

/** The workspace base URL's own listing: the key's workspace's deployments, each named by its slug. */
export const WORKSPACE_MODEL_OPERATIONS: readonly PlacedOperation[] = [
  {
    path: '/models', method: 'get', operationId: 'workspace.models.list',
    operation: { summary: 'List the workspace\'s deployments as models', tags: ['models'], responses: { 200: json(ref('WorkspaceModelList'), 'One per deployment.'), ...errors(401) } },
  },
  {
    path: '/models/{model}', method: 'get', operationId: 'workspace.models.retrieve',
    operation: {
      summary: 'Retrieve a deployment as a model', tags: ['models'], parameters: [{ ...parameter('Model'), description: 'a deployment\'s slug or its model id' }],
      responses: { 200: json(ref('WorkspaceModel'), 'The deployment.'), ...errors(400, 401, 404) },
    },
  },
];

/** A deployment endpoint's operation as the workspace base URL serves it. */
export function workspaceOperation(name: DeploymentEndpointName, routedByModel: boolean): Operation {
  const operation = DEPLOYMENT_OPERATIONS[name];
  if (!routedByModel) return operation;
  return { ...operation, description: operation.description ? `${operation.description} ${ROUTED_BY_MODEL}` : ROUTED_BY_MODEL };
}

/** This document. */
export const DOCUMENT_OPERATION: Operation = {
  summary: 'This OpenAPI document', tags: ['meta'], security: [],
  responses: {
    200: json({ type: 'object' }, 'The OpenAPI 3.1 document of `/v1`; no key needed. Cacheable for a day, with an ETag.'),
    304: { description: 'Unchanged since the ETag sent in If-None-Match.' },
  },
};
