import path from 'node:path';
import { PROJECT_ROOT } from '../../control-plane/api/startup';
import { DEPLOYMENT_ENDPOINTS, routesByModel, SHARED_BASE, SHARED_ENDPOINTS } from '../v1/endpoint-table';
import { BATCH_SCHEMAS } from './batch-schemas';
import { ERROR_SCHEMA, errorResponses } from './error-responses';
import { MEDIA_SCHEMAS } from './media-schemas';
import {
  DEPLOYMENT_OPERATIONS, DOCUMENT_OPERATION, RATE_LIMIT_HEADER_NAMES, SHARED_OPERATIONS, WORKSPACE_MODEL_OPERATIONS, WORKSPACE_RECORD_ENDPOINTS,
  workspaceOperation, type Operation,
} from './openapi-paths';
import { RESPONSES_SCHEMAS } from './responses-schemas';
import type { JsonObject } from './schema-helpers';
import { TEXT_SCHEMAS } from './text-schemas';

/** The checked-in copy; `npm run openapi` writes it, a test fails when it differs from what this module builds. */
export const OPENAPI_FILE = path.join(PROJECT_ROOT, 'gateway', 'openapi', 'openapi.json');
export const OPENAPI_PATH = '/v1/openapi.json';
/** Where a deployment's endpoints live; the document's paths are from the server's origin. */
export const DEPLOYMENT_BASE = '/d/{slug}/v1';
/** The workspace base URL: `model` picks the deployment (docs/api-contract.md#base-urls). */
export const WORKSPACE_BASE = '/v1';

const COUNT = { type: 'integer' };
/** OpenAI's reset format: Go duration strings. */
const DURATION = { type: 'string', pattern: '^(\\d+h)?(\\d+m)?([\\d.]+m?s)$', examples: ['1s', '6m0s', '250ms'] };
const RATE_LIMIT_HEADERS: Record<(typeof RATE_LIMIT_HEADER_NAMES)[number], { description: string; schema: JsonObject }> = {
  'X-RateLimit-Limit': { description: 'the key\'s requests per minute', schema: COUNT },
  'X-RateLimit-Remaining': { description: 'requests left in the current minute window', schema: COUNT },
  'X-RateLimit-Reset': { description: 'seconds until the oldest request leaves the window', schema: { type: 'number' } },
  'x-ratelimit-limit-requests': { description: 'OpenAI\'s name: the key\'s requests per minute', schema: COUNT },
  'x-ratelimit-remaining-requests': { description: 'OpenAI\'s name: requests left in the window', schema: COUNT },
  'x-ratelimit-reset-requests': { description: 'OpenAI\'s name: until the oldest request leaves the window', schema: DURATION },
  'X-RateLimit-Limit-Tokens': { description: 'also OpenAI\'s name: the key\'s tokens per day', schema: COUNT },
  'X-RateLimit-Remaining-Tokens': { description: 'also OpenAI\'s name: tokens left today', schema: COUNT },
  'X-RateLimit-Reset-Tokens': { description: 'also OpenAI\'s name: until tokens free up, as a duration string', schema: DURATION },
};

/**
 * The OpenAPI 3.1 document of `/v1`: every deployment endpoint, the workspace base URL's, the shared endpoint's and this document.
 * A new endpoint: its row in endpoint-table.ts, its operation under the same name in
 * DEPLOYMENT_OPERATIONS or SHARED_OPERATIONS (schemas it shares in the *-schemas.ts files, errors by status), then
 * `npm run openapi`, and a call of it in test/integration/openapi.test.ts; the tests name each
 * step that is missing.
 */
export function buildOpenApiDocument(): JsonObject {
  const paths: Record<string, Record<string, JsonObject>> = {};
  const add = (route: string, method: string, operationId: string, operation: Operation) => {
    paths[route] ??= {};
    paths[route][method] = { operationId, ...operation };
  };
  for (const endpoint of DEPLOYMENT_ENDPOINTS) {
    const operation = DEPLOYMENT_OPERATIONS[endpoint.name];
    add(`${DEPLOYMENT_BASE}${endpoint.path}`, endpoint.method.toLowerCase(), endpoint.name, { ...operation, parameters: [{ $ref: '#/components/parameters/Slug' }, ...(operation.parameters ?? [])] });
  }
  for (const endpoint of SHARED_ENDPOINTS) add(`${SHARED_BASE}${endpoint.path}`, endpoint.method.toLowerCase(), `shared.${endpoint.name}`, SHARED_OPERATIONS[endpoint.name]);
  for (const { path: route, method, operationId, operation } of WORKSPACE_MODEL_OPERATIONS) add(`${WORKSPACE_BASE}${route}`, method, operationId, operation);
  for (const endpoint of DEPLOYMENT_ENDPOINTS) {
    const routed = routesByModel(endpoint);
    if (!routed && !WORKSPACE_RECORD_ENDPOINTS.includes(endpoint.name)) continue;
    add(`${WORKSPACE_BASE}${endpoint.path}`, endpoint.method.toLowerCase(), `workspace.${endpoint.name}`, workspaceOperation(endpoint.name, routed));
  }
  add(OPENAPI_PATH, 'get', 'openapi', DOCUMENT_OPERATION);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Inference platform /v1',
      version: '1',
      description: 'OpenAI-compatible endpoints of each deployment (`/d/{slug}/v1`), the workspace base URL (`/v1`, routed by `model`) '
        + 'and the shared guest endpoint (`/shared/v1`). '
        + 'The contract in prose: docs/api-contract.md. Generated from gateway/openapi/*.ts by `npm run openapi`; do not edit.',
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    security: [{ bearer: [] }],
    tags: ['text', 'responses', 'models', 'images', 'videos', 'requests', 'batches', 'shared', 'meta'].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'A workspace API key (`mk-…`); the same key works on every deployment of the workspace and on the shared endpoint.' },
      },
      parameters: {
        Slug: { name: 'slug', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9-]{1,64}$' }, description: 'the deployment\'s slug' },
        Id: { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
        Model: { name: 'model', in: 'path', required: true, schema: { type: 'string' }, description: 'a model id; its slashes may be raw or percent-encoded' },
        IdempotencyKey: {
          name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', pattern: '^[\\x21-\\x7e]{1,255}$' },
          description: 'a retried submission with the same key returns the first record',
        },
      },
      headers: RATE_LIMIT_HEADERS,
      responses: errorResponses(),
      schemas: { Error: ERROR_SCHEMA, ...TEXT_SCHEMAS, ...RESPONSES_SCHEMAS, ...MEDIA_SCHEMAS, ...BATCH_SCHEMAS },
    },
  };
}

/** The document as the checked-in file holds it and `GET /v1/openapi.json` sends it. */
export function printOpenApiDocument(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}
