import path from 'node:path';
import { PROJECT_ROOT } from '../../control-plane/project-root';
import { DEPLOYMENT_ENDPOINTS } from '../v1/endpoint-table';
import { BATCH_SCHEMAS } from './batch-schemas';
import { ERROR_SCHEMA, errorResponses } from './error-responses';
import { MEDIA_SCHEMAS } from './media-schemas';
import { DEPLOYMENT_OPERATIONS, DOCUMENT_OPERATION, SHARED_OPERATIONS, type Operation } from './openapi-paths';
import type { JsonObject } from './schema-helpers';
import { TEXT_SCHEMAS } from './text-schemas';

/** The checked-in copy; `npm run openapi` writes it, a test fails when it differs from what this module builds. */
export const OPENAPI_FILE = path.join(PROJECT_ROOT, 'gateway', 'openapi', 'openapi.json');
export const OPENAPI_PATH = '/v1/openapi.json';
/** Where a deployment's endpoints live; the document's paths are from the server's origin. */
export const DEPLOYMENT_BASE = '/d/{slug}/v1';
export const SHARED_BASE = '/shared/v1';

const RATE_LIMIT_HEADERS: Record<string, string> = {
  'X-RateLimit-Limit': 'the key\'s requests per minute',
  'X-RateLimit-Remaining': 'requests left in the current minute window',
  'X-RateLimit-Reset': 'seconds until the oldest request leaves the window',
  'X-RateLimit-Limit-Tokens': 'the key\'s tokens per day',
  'X-RateLimit-Remaining-Tokens': 'tokens left today',
  'X-RateLimit-Reset-Tokens': 'seconds until tokens free up',
};

/**
 * The OpenAPI 3.1 document of `/v1`: every deployment endpoint, the shared endpoint and this document.
 * A new endpoint: its row in endpoint-table.ts, its operation under the same name in
 * DEPLOYMENT_OPERATIONS (schemas it shares in the *-schemas.ts files, errors by status), then
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
  for (const [route, { method, operationId, operation }] of Object.entries(SHARED_OPERATIONS)) add(`${SHARED_BASE}${route}`, method, operationId, operation);
  add(OPENAPI_PATH, 'get', 'openapi', DOCUMENT_OPERATION);
  return {
    openapi: '3.1.0',
    info: {
      title: 'Inference platform /v1',
      version: '1',
      description: 'OpenAI-compatible endpoints of each deployment (`/d/{slug}/v1`) and the shared guest endpoint (`/shared/v1`). '
        + 'The contract in prose: docs/api-contract.md. Generated from gateway/openapi/*.ts by `npm run openapi`; do not edit.',
    },
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    security: [{ bearer: [] }],
    tags: ['text', 'models', 'images', 'videos', 'requests', 'batches', 'shared', 'meta'].map((name) => ({ name })),
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
      headers: Object.fromEntries(Object.entries(RATE_LIMIT_HEADERS).map(([name, description]) => [name, { description, schema: { type: 'number' } }])),
      responses: errorResponses(),
      schemas: { Error: ERROR_SCHEMA, ...TEXT_SCHEMAS, ...MEDIA_SCHEMAS, ...BATCH_SCHEMAS },
    },
  };
}

/** The document as the checked-in file holds it and `GET /v1/openapi.json` sends it. */
export function printOpenApiDocument(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}
