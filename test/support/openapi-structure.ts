/**
 * The structure of an OpenAPI 3.1 document, as a draft 2020-12 schema: the objects and fields
 * of the specification (https://spec.openapis.org/oas/v3.1.0) that a document of ours may use,
 * closed (`unevaluatedProperties: false`, `x-` extensions allowed), so a misspelled or misplaced
 * field fails. Schema objects are checked separately: Ajv compiles each one strictly.
 */
const extensible = (properties: Record<string, unknown>, required: string[] = []) => ({
  type: 'object', properties, required, patternProperties: { '^x-': true }, unevaluatedProperties: false,
});
const reference = { type: 'object', required: ['$ref'], properties: { $ref: { type: 'string' }, summary: { type: 'string' }, description: { type: 'string' } }, additionalProperties: false };
const orReference = (name: string) => ({ anyOf: [reference, { $ref: `#/$defs/${name}` }] });
const mapOf = (schema: unknown) => ({ type: 'object', additionalProperties: schema });
const schemaObject = { anyOf: [{ type: 'object' }, { type: 'boolean' }] };

export const OPENAPI_31_STRUCTURE = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  ...extensible({
    openapi: { type: 'string', pattern: '^3\\.1\\.\\d+$' },
    info: { $ref: '#/$defs/info' },
    jsonSchemaDialect: { type: 'string' },
    servers: { type: 'array' },
    paths: { type: 'object', propertyNames: { pattern: '^/' }, additionalProperties: { $ref: '#/$defs/pathItem' } },
    webhooks: mapOf({ $ref: '#/$defs/pathItem' }),
    components: { $ref: '#/$defs/components' },
    security: { type: 'array', items: { $ref: '#/$defs/securityRequirement' } },
    tags: { type: 'array', items: extensible({ name: { type: 'string' }, description: { type: 'string' } }, ['name']) },
    externalDocs: { type: 'object' },
  }, ['openapi', 'info']),
  anyOf: [{ required: ['paths'] }, { required: ['components'] }, { required: ['webhooks'] }],
  $defs: {
    info: extensible({
      title: { type: 'string' }, summary: { type: 'string' }, description: { type: 'string' }, termsOfService: { type: 'string' },
      contact: { type: 'object' }, license: { type: 'object' }, version: { type: 'string' },
    }, ['title', 'version']),
    pathItem: extensible({
      summary: { type: 'string' }, description: { type: 'string' }, servers: { type: 'array' },
      parameters: { type: 'array', items: orReference('parameter') },
      ...Object.fromEntries(['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'].map((method) => [method, { $ref: '#/$defs/operation' }])),
    }),
    operation: extensible({
      tags: { type: 'array', items: { type: 'string' } }, summary: { type: 'string' }, description: { type: 'string' },
      operationId: { type: 'string' }, parameters: { type: 'array', items: orReference('parameter') },
      requestBody: orReference('requestBody'), responses: { $ref: '#/$defs/responses' },
      callbacks: { type: 'object' }, deprecated: { type: 'boolean' },
      security: { type: 'array', items: { $ref: '#/$defs/securityRequirement' } }, servers: { type: 'array' },
    }, ['responses']),
    responses: {
      type: 'object', minProperties: 1,
      propertyNames: { pattern: '^([1-5](\\d\\d|XX)|default|x-.*)$' },
      additionalProperties: orReference('response'),
    },
    response: extensible({
      description: { type: 'string' }, headers: mapOf(orReference('header')), content: mapOf({ $ref: '#/$defs/mediaType' }), links: { type: 'object' },
    }, ['description']),
    mediaType: extensible({ schema: schemaObject, example: true, examples: { type: 'object' }, encoding: { type: 'object' } }),
    requestBody: extensible({ description: { type: 'string' }, content: mapOf({ $ref: '#/$defs/mediaType' }), required: { type: 'boolean' } }, ['content']),
    parameter: {
      ...extensible({
        name: { type: 'string' }, in: { enum: ['query', 'header', 'path', 'cookie'] }, description: { type: 'string' },
        required: { type: 'boolean' }, deprecated: { type: 'boolean' }, allowEmptyValue: { type: 'boolean' },
        style: { type: 'string' }, explode: { type: 'boolean' }, schema: schemaObject, example: true,
      }, ['name', 'in']),
      // A path parameter is always required (OpenAPI 3.1, Parameter Object).
      if: { properties: { in: { const: 'path' } } }, then: { required: ['required'], properties: { required: { const: true } } },
    },
    header: extensible({ description: { type: 'string' }, required: { type: 'boolean' }, schema: schemaObject, deprecated: { type: 'boolean' } }),
    securityScheme: extensible({
      type: { enum: ['apiKey', 'http', 'mutualTLS', 'oauth2', 'openIdConnect'] }, description: { type: 'string' },
      name: { type: 'string' }, in: { type: 'string' }, scheme: { type: 'string' }, bearerFormat: { type: 'string' },
      flows: { type: 'object' }, openIdConnectUrl: { type: 'string' },
    }, ['type']),
    securityRequirement: mapOf({ type: 'array', items: { type: 'string' } }),
    components: extensible({
      schemas: mapOf(schemaObject),
      responses: mapOf(orReference('response')),
      parameters: mapOf(orReference('parameter')),
      requestBodies: mapOf(orReference('requestBody')),
      headers: mapOf(orReference('header')),
      securitySchemes: mapOf(orReference('securityScheme')),
      examples: { type: 'object' }, links: { type: 'object' }, callbacks: { type: 'object' }, pathItems: { type: 'object' },
    }),
  },
};
