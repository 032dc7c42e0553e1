import fc from 'fast-check';
import type { GraphQLOperation } from './graphql-cases';
import { operationBody } from './graphql-cases';
import { anyHostile, objectOf, stringifyJson } from './hostile-values';
import { callerArbitrary, type Caller, type HttpCase } from './http-cases';
import { bodyFormArbitrary, serializeBody } from './json-bodies';
import { BODY_LIMITS } from './fuzz-target';

export function callerOf(operation: GraphQLOperation): Caller {
  if (operation.caller === 'bad') return { header: 'Bearer mk-not-a-key' };
  return operation.caller;
}

/** An operation over HTTP as Apollo is usually called: POST, JSON. */
export function operationCase(operation: GraphQLOperation): HttpCase {
  return {
    route: `graphql ${operation.kind} ${operation.field}`, method: 'POST', path: '/graphql', caller: callerOf(operation),
    headers: { 'content-type': 'application/json' }, body: Buffer.from(stringifyJson(operationBody(operation))!),
  };
}

/** Query texts no schema-driven generator writes: broken syntax, depth and size past the limits, odd documents. */
function oddDocuments(valid: string): fc.Arbitrary<string> {
  const edits = fc.array(fc.tuple(fc.nat(), fc.constantFrom('', '{', '}', '(', ')', '$', '@', '"', '\\', '...', ':', '!', '#', '\u0000', 'é', ' ', 'query', 'fragment')), { minLength: 1, maxLength: 4 })
    .map((changes) => changes.reduce((text, [at, insert]) => {
      const index = text.length ? at % text.length : 0;
      return text.slice(0, index) + insert + text.slice(index + (insert === '' ? 1 : 0));
    }, valid));
  const depth = fc.integer({ min: 2, max: 12_000 });
  return fc.oneof(
    { arbitrary: edits, weight: 6 },
    { arbitrary: depth.map((levels) => `{ ${'a { '.repeat(levels)}b${' }'.repeat(levels)} }`), weight: 1 },
    { arbitrary: depth.map((levels) => `{ ${'__schema { types { fields { type { '}${'ofType { '.repeat(Math.min(levels, 4_000))}name${' }'.repeat(Math.min(levels, 4_000))} } } } } }`), weight: 1 },
    { arbitrary: fc.integer({ min: 1, max: 8_000 }).map((count) => `{ ${Array.from({ length: count }, (_, index) => `a${index}: __typename`).join(' ')} }`), weight: 1 },
    { arbitrary: fc.integer({ min: 1, max: 3_000 }).map((count) => `{ deployments { id } ${Array.from({ length: count }, (_, index) => `d${index}: deployments { id }`).join(' ')} }`), weight: 1 },
    { arbitrary: fc.integer({ min: 1, max: 3_000 }).map((count) => `{ __typename ${'@skip(if: false) '.repeat(count)}}`), weight: 1 },
    {
      arbitrary: fc.constantFrom(
        '', ' ', '{', '}', '{}', 'query', 'query { }', '{ __typename }', 'subscription { deploymentUpdated { id } }', 'mutation { __typename }',
        'query A { __typename } query A { __typename }', 'query A { __typename } query B { __typename }', '{ ...F } fragment F on Query { ...F }',
        'fragment F on Query { __typename }', 'query ($a: Int = "x") { __typename }', 'query ($a: Nope) { __typename }', 'query ($a: Int!) { __typename }',
        '{ deployment(id: $undefined) { id } }', '{ __type(name: "Deployment") { fields { name type { name ofType { name ofType { name } } } } } }',
        '{ requests(deploymentId: "x", limit: 99999999999) { id } }', '{ ledgerEntries(from: "2025-01-01T00:00:00Z", to: "2025-01-02T00:00:00Z", limit: -1) { id } }',
        '{ scalingDecisions(limit: 500) { id } }', '# only a comment', '\ufeff{ __typename }', '{ __typename } trailing', 'schema { query: Query }', 'type Q { a: Int }',
        '{ deployments { id } }'.repeat(200), `{ catalog { id } ${'"'.repeat(3)}${'a'.repeat(40_000)}${'"'.repeat(3)} }`,
      ),
      weight: 2,
    },
  );
}

/**
 * `/graphql` requests around the operation: GET with a query string, other methods, other
 * content types, bodies whose query, variables, operationName or extensions have the wrong
 * type, batches, broken JSON, bodies at the size limit.
 */
export function transportCases(operations: fc.Arbitrary<GraphQLOperation>): fc.Arbitrary<HttpCase> {
  const base = operations.chain((operation) => fc.record({
    operation: fc.constant(operation),
    query: fc.oneof({ arbitrary: fc.constant(operation.query), weight: 3 }, { arbitrary: oddDocuments(operation.query), weight: 4 }, { arbitrary: anyHostile, weight: 1 }),
    variables: fc.oneof({ arbitrary: fc.constant(operation.variables), weight: 4 }, { arbitrary: anyHostile, weight: 1 }, { arbitrary: fc.constantFrom('{}', '[]', 'null', ''), weight: 1 }),
    operationName: fc.oneof({ arbitrary: fc.constant(undefined), weight: 6 }, { arbitrary: fc.constantFrom('Fuzz', 'Other', '', null), weight: 2 }, { arbitrary: anyHostile, weight: 1 }),
    extensions: fc.oneof(
      { arbitrary: fc.constant(undefined), weight: 8 },
      { arbitrary: fc.constantFrom({ persistedQuery: { version: 1, sha256Hash: 'x' } }, { persistedQuery: { version: 2 } }, { persistedQuery: null }, 'x', []), weight: 1 },
      { arbitrary: anyHostile, weight: 1 },
    ),
    form: bodyFormArbitrary(BODY_LIMITS.json),
    shape: fc.constantFrom('object', 'object', 'object', 'object', 'batch', 'get', 'other-method'),
    contentType: fc.oneof(
      { arbitrary: fc.constant('application/json'), weight: 10 },
      { arbitrary: fc.constantFrom(undefined, 'text/plain', 'application/graphql', 'application/json; charset=utf-16', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/graphql-response+json'), weight: 2 },
    ),
    preflight: fc.boolean(),
    method: fc.constantFrom('PUT', 'PATCH', 'DELETE', 'OPTIONS', 'HEAD'),
    caller: callerArbitrary(callerOf(operation)),
  }));
  return base.map((values): HttpCase => {
    const body = objectOf([
      ['query', values.query], ...(values.variables !== undefined ? [['variables', values.variables] as [string, unknown]] : []),
      ...(values.operationName !== undefined ? [['operationName', values.operationName] as [string, unknown]] : []),
      ...(values.extensions !== undefined ? [['extensions', values.extensions] as [string, unknown]] : []),
    ]);
    const headers: Record<string, string> = values.contentType ? { 'content-type': values.contentType } : {};
    if (values.preflight) headers['apollo-require-preflight'] = 'true';
    const route = `graphql transport (${values.shape})`;
    if (values.shape === 'get') {
      const search = new URLSearchParams();
      for (const [name, value] of Object.entries(body)) search.set(name, typeof value === 'string' ? value : stringifyJson(value) ?? '');
      return { route, method: 'GET', path: `/graphql?${search.toString()}`, caller: values.caller, headers };
    }
    if (values.shape === 'other-method') return { route, method: values.method, path: '/graphql', caller: values.caller, headers, body: serializeBody(body, values.form) };
    const payload = values.shape === 'batch' ? { batch: [body, body] } : body;
    const bytes = values.shape === 'batch' ? Buffer.from(stringifyJson([body, operationBody(values.operation)])!) : serializeBody(payload, values.form);
    return { route, method: 'POST', path: '/graphql', caller: values.caller, headers, body: bytes };
  });
}
