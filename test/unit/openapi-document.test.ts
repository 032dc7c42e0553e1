import fs from 'node:fs';
import Ajv2020 from 'ajv/dist/2020';
import { DEPLOYMENT_BASE, OPENAPI_FILE, WORKSPACE_BASE, buildOpenApiDocument, printOpenApiDocument } from '../../gateway/openapi/openapi-document';
import { WORKSPACE_RECORD_ENDPOINTS } from '../../gateway/openapi/openapi-paths';
import { DEPLOYMENT_ENDPOINTS, routesByModel, SHARED_BASE, SHARED_ENDPOINTS } from '../../gateway/v1/endpoint-table';
import { documentAjv } from '../support/openapi-conformance';
import { OPENAPI_31_STRUCTURE } from '../support/openapi-structure';

type Json = Record<string, any>;
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options', 'trace'];

/** Every value under `node` with its JSON pointer. */
function* walk(node: unknown, pointer = ''): Generator<[string, string, unknown, Json]> {
  if (node === null || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) {
    yield [`${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`, key, value, node as Json];
    yield* walk(value, `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`);
  }
}

function resolve(document: Json, node: Json): Json {
  if (typeof node?.$ref !== 'string') return node;
  return resolve(document, node.$ref.slice(2).split('/').reduce((parent: Json, part: string) => parent?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], document));
}

/** The OpenAPI document of `/v1` as a document: generated and checked in alike, valid OpenAPI 3.1, and naming every endpoint of the table. */
describe('the OpenAPI document', () => {
  const document = buildOpenApiDocument() as Json;

  it('is checked in exactly as gateway/openapi/*.ts builds it (run `npm run openapi` after changing them)', () => {
    expect(fs.readFileSync(OPENAPI_FILE, 'utf8')).toBe(printOpenApiDocument());
  });

  it('has the structure of an OpenAPI 3.1 document', () => {
    const validate = new Ajv2020({ strict: true, strictRequired: false, allErrors: true }).compile(OPENAPI_31_STRUCTURE);
    expect(validate(document) ? [] : validate.errors).toEqual([]);
  });

  it('the structure check refuses a misplaced field, an operation without responses and an optional path parameter', () => {
    const validate = new Ajv2020({ strict: true, strictRequired: false, allErrors: true }).compile(OPENAPI_31_STRUCTURE);
    const broken = structuredClone(document);
    broken.paths['/d/{slug}/v1/models'].get.response = broken.paths['/d/{slug}/v1/models'].get.responses;
    delete broken.paths['/d/{slug}/v1/models'].get.responses;
    broken.components.parameters.Slug.required = false;
    expect(validate(broken)).toBe(false);
    const locations = validate.errors!.map((error) => error.instancePath);
    expect(locations).toEqual(expect.arrayContaining(['/paths/~1d~1{slug}~1v1~1models/get', '/components/parameters/Slug/required']));
  });

  it('holds only draft 2020-12 schemas that compile strictly, and references that resolve', () => {
    const ajv = documentAjv(document);
    const unresolved: string[] = [];
    for (const [pointer, key, value] of walk(document)) {
      if (key === '$ref' && resolve(document, { $ref: value }) === undefined) unresolved.push(`${pointer}: ${String(value)}`);
    }
    expect(unresolved).toEqual([]);
    const schemas = [...walk(document)].filter(([pointer, key]) => (key === 'schema' || key === 'x-itemSchema') || /^\/components\/schemas\/[^/]+$/.test(pointer));
    expect(schemas.length).toBeGreaterThan(50);
    for (const [pointer] of schemas) {
      expect(() => ajv.compile({ $ref: `https://openapi.test/openapi.json#${encodeURI(pointer)}` })).not.toThrow();
    }
  });

  it('declares each path parameter of a path, and gives each operation a unique operationId', () => {
    const problems: string[] = [];
    const ids = new Set<string>();
    for (const [template, item] of Object.entries<Json>(document.paths)) {
      const names = [...template.matchAll(/\{([^}]+)\}/g)].map((match) => match[1]).sort();
      for (const method of Object.keys(item)) {
        expect(METHODS).toContain(method);
        const operation = item[method];
        const declared = (operation.parameters ?? []).map((parameter: Json) => resolve(document, parameter)).filter((parameter: Json) => parameter.in === 'path').map((parameter: Json) => parameter.name).sort();
        if (JSON.stringify(declared) !== JSON.stringify(names)) problems.push(`${method} ${template}: path parameters ${declared.join(',')} for ${names.join(',')}`);
        if (ids.has(operation.operationId)) problems.push(`${method} ${template}: operationId ${operation.operationId} twice`);
        ids.add(operation.operationId);
      }
    }
    expect(problems).toEqual([]);
  });

  it('has every endpoint of endpoint-table.ts under /d/{slug}/v1, by its name, and no other deployment path', () => {
    const inTable = DEPLOYMENT_ENDPOINTS.map((endpoint) => `${endpoint.method.toLowerCase()} ${DEPLOYMENT_BASE}${endpoint.path} ${endpoint.name}`).sort();
    const inDocument = Object.entries<Json>(document.paths).filter(([template]) => template.startsWith(`${DEPLOYMENT_BASE}/`))
      .flatMap(([template, item]) => Object.entries<Json>(item).map(([method, operation]) => `${method} ${template} ${operation.operationId}`)).sort();
    expect(inDocument).toEqual(inTable);
  });

  it('has every endpoint of the shared table under /shared/v1, as shared.<name>, and no other shared path', () => {
    const inTable = SHARED_ENDPOINTS.map((endpoint) => `${endpoint.method.toLowerCase()} ${SHARED_BASE}${endpoint.path} shared.${endpoint.name}`).sort();
    const inDocument = Object.entries<Json>(document.paths).filter(([template]) => template.startsWith(`${SHARED_BASE}/`))
      .flatMap(([template, item]) => Object.entries<Json>(item).map(([method, operation]) => `${method} ${template} ${operation.operationId}`)).sort();
    expect(inDocument).toEqual(inTable);
  });

  it('has on the workspace base URL /v1 its models, every endpoint routed by model and the by-id records, as workspace.<name>', () => {
    const expected = [
      `get ${WORKSPACE_BASE}/models workspace.models.list`, `get ${WORKSPACE_BASE}/models/{model} workspace.models.retrieve`,
      ...DEPLOYMENT_ENDPOINTS.filter((endpoint) => routesByModel(endpoint) || WORKSPACE_RECORD_ENDPOINTS.includes(endpoint.name))
        .map((endpoint) => `${endpoint.method.toLowerCase()} ${WORKSPACE_BASE}${endpoint.path} workspace.${endpoint.name}`),
    ].sort();
    expect(expected).toContain(`post ${WORKSPACE_BASE}/responses workspace.responses.create`);
    const inDocument = Object.entries<Json>(document.paths).filter(([template]) => template.startsWith(`${WORKSPACE_BASE}/`) && template !== '/v1/openapi.json')
      .flatMap(([template, item]) => Object.entries<Json>(item).map(([method, operation]) => `${method} ${template} ${operation.operationId}`)).sort();
    expect(inDocument).toEqual(expected);
  });

  it('types every event of a Responses stream with its type and sequence number, closed', () => {
    const events = resolve(document, document.components.schemas.ResponseStreamEvent).anyOf as Json[];
    const types = events.map((event) => event.properties.type.const);
    expect(types).toEqual(expect.arrayContaining(['response.created', 'response.output_text.delta', 'response.function_call_arguments.done', 'response.completed', 'error']));
    for (const event of events) expect(event).toMatchObject({ additionalProperties: false, required: expect.arrayContaining(['type', 'sequence_number']) });
    const media = document.paths[`${DEPLOYMENT_BASE}/responses`].post.responses['200'].content['text/event-stream'];
    expect(media['x-streamEnd']).toEqual(['response.completed', 'response.incomplete', 'response.failed', 'error']);
  });

  it('asks for the bearer key everywhere but on the document itself', () => {
    expect(document.security).toEqual([{ bearer: [] }]);
    const open = Object.entries<Json>(document.paths).flatMap(([template, item]) => Object.entries<Json>(item)
      .filter(([, operation]) => operation.security !== undefined).map(([method]) => `${method} ${template}`));
    expect(open).toEqual(['get /v1/openapi.json']);
  });
});
