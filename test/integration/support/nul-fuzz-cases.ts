import {
  buildClientSchema, getIntrospectionQuery, getNamedType, getNullableType, isEnumType, isInputObjectType, isListType, isNonNullType, isScalarType,
  type GraphQLArgument, type GraphQLField, type GraphQLInputType, type GraphQLSchema, type IntrospectionQuery,
} from 'graphql';
import { overWebSocket } from '../../support/graphql-websocket';
import { seededRandom } from '../../../common/seeded-random';

export interface NulFuzzOptions {
  url: string;
  apiKey: string;
  operatorToken: string;
  /** The generator's seed; a failure names it, so the run can be repeated. */
  seed: number;
  /** Base URLs (…/v1) of a chat deployment with a running replica, of external image, edit and video deployments, and the shared endpoint. */
  deployments: { chat: string; image: string; edit: string; video: string; shared: string };
  models: { chat: string; image: string; edit: string; video: string };
  png: Buffer;
  /** A webhook_url the server accepts (loopback, allowed in tests). */
  hook: string;
}

export interface NulFuzzResult {
  graphql: number;
  rest: number;
  failures: unknown[];
}

type Path = Array<string | number>;

// No lone surrogates (GraphQL refuses them as escapes) and no "/" (it would split a path id).
const ALPHABET = ['a', 'Z', '0', ' ', '-', '_', '.', 'é', '漢', '😀', '\t', '"', '\\', '%', '?', '#'];

/** A string holding at least one NUL, somewhere among a few other characters. */
function nulStrings(random: () => number): () => string {
  const part = () => Array.from({ length: Math.floor(random() * 4) }, () => ALPHABET[Math.floor(random() * ALPHABET.length)]).join('');
  return () => `${part()}\u0000${part()}${random() < 0.3 ? '\u0000' : ''}`;
}

const param = (path: Path): string => path.reduce<string>((name, segment) => (typeof segment === 'number' ? `${name}[${segment}]` : name ? `${name}.${segment}` : segment), '');

/** Every GraphQL case and every REST case; failures are collected, not thrown, so one run shows them all. */
export async function nulFuzzCases(options: NulFuzzOptions): Promise<NulFuzzResult> {
  const random = seededRandom(options.seed);
  const nul = nulStrings(random);
  const failures: unknown[] = [];
  const graphql = await graphqlCases(options, nul, failures);
  const rest = await restCases(options, nul, failures);
  return { graphql, rest, failures: failures.map((failure) => ({ seed: options.seed, ...(failure as object) })) };
}

// ---------------------------------------------------------------------------------------------
// GraphQL: the schema as the server reports it.

interface Slot {
  /** Argument name, then input fields and list indexes. */
  path: Path;
  /** The NUL goes in a key of a JSON object at `path`, not in a value. */
  inKey: boolean;
}

const SAMPLES: Record<string, unknown> = {
  String: 'x', ID: 'x', Int: 1, Float: 1, Boolean: false, SafeInt: 1, DateTimeISO: '2025-01-01T00:00:00.000Z', Decimal: '1', JSONObject: {},
};
/** Scalars a string cannot be sent as; every other one (String, ID, dates, decimals, new ones) gets a NUL. */
const NON_STRING_SCALARS = ['Int', 'Float', 'Boolean', 'SafeInt'];

function slotsOf(type: GraphQLInputType, path: Path, out: Slot[], depth = 0): void {
  if (depth > 6) return;
  const inner = getNullableType(type);
  if (isListType(inner)) return slotsOf(inner.ofType, [...path, 0], out, depth + 1);
  if (isInputObjectType(inner)) {
    for (const field of Object.values(inner.getFields())) slotsOf(field.type, [...path, field.name], out, depth + 1);
    return;
  }
  if (!isScalarType(inner) || NON_STRING_SCALARS.includes(inner.name)) return;
  if (inner.name.startsWith('JSON')) out.push({ path: [...path, 'nested', 'value'], inKey: false }, { path, inKey: true });
  else out.push({ path, inKey: false });
}

/** The smallest valid-looking value: required input fields only. */
export function sample(type: GraphQLInputType): unknown {
  const inner = getNullableType(type);
  if (isListType(inner)) return [sample(inner.ofType)];
  if (isInputObjectType(inner)) {
    const value: Record<string, unknown> = {};
    for (const field of Object.values(inner.getFields())) {
      if (isNonNullType(field.type) && field.defaultValue === undefined) value[field.name] = sample(field.type);
    }
    return value;
  }
  if (isEnumType(inner)) return inner.getValues()[0].value;
  return SAMPLES[(inner as { name: string }).name] ?? 'x';
}

/** A value of `type` with the NUL at `rest` (the remaining path) and sample values elsewhere. */
function withNul(type: GraphQLInputType, rest: Path, inKey: boolean, text: string): unknown {
  const inner = getNullableType(type);
  if (isListType(inner)) return [withNul(inner.ofType, rest.slice(1), inKey, text)];
  if (isInputObjectType(inner)) {
    const value = sample(inner) as Record<string, unknown>;
    const [name, ...more] = rest;
    value[name as string] = withNul(inner.getFields()[name as string].type, more, inKey, text);
    return value;
  }
  if (isScalarType(inner) && inner.name.startsWith('JSON')) {
    if (inKey) return { id: 'acme/fuzz', [text]: 1 };
    let json: unknown = text;
    for (const segment of [...rest].reverse()) json = { [segment]: json };
    return { id: 'acme/fuzz', ...(json as object) };
  }
  return text;
}

/** `value` as a GraphQL literal of `type` (strings escaped as JSON, which GraphQL reads alike). */
function literal(value: unknown, type: GraphQLInputType): string {
  const inner = getNullableType(type);
  if (value === null || value === undefined) return 'null';
  if (isListType(inner)) return `[${(value as unknown[]).map((item) => literal(item, inner.ofType)).join(', ')}]`;
  if (isInputObjectType(inner)) {
    return `{${Object.entries(value as Record<string, unknown>).map(([name, item]) => `${name}: ${literal(item, inner.getFields()[name].type)}`).join(', ')}}`;
  }
  if (isEnumType(inner)) return String(value);
  if (isScalarType(inner) && inner.name.startsWith('JSON')) return jsonLiteral(value);
  return JSON.stringify(value);
}

function jsonLiteral(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(jsonLiteral).join(', ')}]`;
  if (value && typeof value === 'object') return `{${Object.entries(value).map(([name, item]) => `${name}: ${jsonLiteral(item)}`).join(', ')}}`;
  return JSON.stringify(value);
}

function selectionOf(field: GraphQLField<unknown, unknown>): string {
  const named = getNamedType(field.type);
  return isScalarType(named) || isEnumType(named) ? '' : ' { __typename }';
}

/** The operation calling `field` with `args`: every argument as a variable, or every one inline. */
export function operationText(kind: string, field: GraphQLField<unknown, unknown>, args: Record<string, unknown>, inline: boolean): string {
  const used = field.args.filter((argument) => args[argument.name] !== undefined);
  const call = used.length === 0 ? '' : `(${used.map((argument) => `${argument.name}: ${inline ? literal(args[argument.name], argument.type) : `$${argument.name}`}`).join(', ')})`;
  const definitions = inline || used.length === 0 ? '' : `(${used.map((argument) => `$${argument.name}: ${String(argument.type)}`).join(', ')})`;
  return `${kind} Fuzz${definitions} { ${field.name}${call}${selectionOf(field)} }`;
}

async function graphqlCases(options: NulFuzzOptions, nul: () => string, failures: unknown[]): Promise<number> {
  const schema = await introspectedSchema(options);
  const roots = [['query', schema.getQueryType()], ['mutation', schema.getMutationType()], ['subscription', schema.getSubscriptionType()]] as const;
  let count = 0;
  for (const [kind, root] of roots) {
    for (const field of Object.values(root?.getFields() ?? {})) {
      const required = (argument: GraphQLArgument) => isNonNullType(argument.type) && argument.defaultValue === undefined;
      for (const argument of field.args) {
        const slots: Slot[] = [];
        slotsOf(argument.type, [argument.name], slots);
        for (const slot of slots) {
          const text = nul();
          const args: Record<string, unknown> = {};
          for (const other of field.args) if (required(other)) args[other.name] = sample(other.type);
          args[argument.name] = withNul(argument.type, slot.path.slice(1), slot.inKey, text);
          const expected = param(slot.path);
          // JSON object keys in a literal must be GraphQL names: a NUL key only travels in variables.
          for (const inline of slot.inKey ? [false] : [false, true]) {
            const query = operationText(kind, field, args, inline);
            const variables = inline ? {} : args;
            const label = `${kind} ${field.name} ${param(slot.path)}${slot.inKey ? ' (a key)' : ''} as ${inline ? 'a literal' : 'a variable'}`;
            count++;
            const outcome = kind === 'subscription'
              ? await overWebSocket(options.url, `Bearer ${options.apiKey}`, { query, variables }, { untilMs: 2_000 })
              : await postGraphQL(options, { query, variables });
            const failure = graphqlFailure(outcome, expected);
            if (failure) failures.push({ label, query, variables: JSON.stringify(variables), ...failure });
          }
        }
      }
    }
  }
  return count;
}

/** The schema as the server reports it (so new operations are covered without touching the fuzz). */
export async function introspectedSchema(options: { url: string; apiKey: string }): Promise<GraphQLSchema> {
  const introspection = await postGraphQL(options, { query: getIntrospectionQuery() });
  return buildClientSchema((introspection.body as { data: IntrospectionQuery }).data);
}

async function postGraphQL(options: { url: string; apiKey: string }, payload: { query: string; variables?: Record<string, unknown> }) {
  const response = await fetch(`${options.url}/graphql`, {
    method: 'POST', headers: { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(payload),
  });
  return { status: response.status, body: await response.json() as unknown };
}

/** Null when the answer is BAD_USER_INPUT naming `expected` (HTTP 400, or a graphql-ws `error` message). */
function graphqlFailure(outcome: { status: number; body: unknown } | Awaited<ReturnType<typeof overWebSocket>>, expected: string): object | null {
  const errors = 'messages' in outcome
    ? (outcome.messages.find((message) => message.type === 'error')?.payload as unknown[] | undefined) ?? (outcome.messages[0]?.payload as { errors?: unknown[] } | undefined)?.errors
    : (outcome.body as { errors?: unknown[] }).errors;
  const first = errors?.[0] as { extensions?: { code?: string; param?: string } } | undefined;
  const status = 'status' in outcome ? outcome.status : 400;
  if (status === 400 && first?.extensions?.code === 'BAD_USER_INPUT' && first.extensions.param === expected) return null;
  return { expected, status, got: 'messages' in outcome ? outcome : outcome.body };
}

// ---------------------------------------------------------------------------------------------
// REST: each /v1 route with its path ids, query parameters and body fields.

interface RestRoute {
  label: string;
  base: keyof NulFuzzOptions['deployments'];
  method: 'GET' | 'POST';
  /** With `{id}` where a path id goes. */
  path: string;
  /** The name a NUL in the path id is refused under. */
  idParam?: string;
  query?: Record<string, string>;
  json?: Record<string, unknown>;
  form?: Record<string, string>;
  files?: Record<string, Blob>;
  /** The body is stored (media): a NUL in it must be a 400 naming the field. Text bodies pass through to the engine. */
  stored: boolean;
  /** The shared endpoint has no slug, and may answer 503 (no provider in the pool) to a body it lets through. */
  shared?: boolean;
}

function restRoutes(options: NulFuzzOptions): RestRoute[] {
  const { models, hook } = options;
  const image = new Blob([options.png], { type: 'image/png' });
  return [
    { label: 'GET /models', base: 'chat', method: 'GET', path: '/models', stored: false },
    { label: 'GET /models/{id}', base: 'chat', method: 'GET', path: '/models/{id}', idParam: 'model', stored: false },
    { label: 'GET /requests', base: 'image', method: 'GET', path: '/requests', query: { status: 'queued', limit: '5' }, stored: false },
    { label: 'GET /requests/{id}', base: 'image', method: 'GET', path: '/requests/{id}', idParam: 'id', stored: false },
    { label: 'POST /requests/{id}/cancel', base: 'image', method: 'POST', path: '/requests/{id}/cancel', idParam: 'id', stored: false },
    { label: 'GET /videos', base: 'video', method: 'GET', path: '/videos', query: { limit: '5' }, stored: false },
    { label: 'GET /videos/{id}', base: 'video', method: 'GET', path: '/videos/{id}', idParam: 'id', stored: false },
    { label: 'GET /videos/{id}/content', base: 'video', method: 'GET', path: '/videos/{id}/content', idParam: 'id', query: { variant: 'video' }, stored: false },
    { label: 'POST /videos/{id}/cancel', base: 'video', method: 'POST', path: '/videos/{id}/cancel', idParam: 'id', stored: false },
    {
      label: 'POST /images/generations', base: 'image', method: 'POST', path: '/images/generations', query: { async: 'true' }, stored: true,
      json: {
        model: models.image, prompt: 'a cat', n: 1, size: '512x512', response_format: 'url', negative_prompt: 'dogs', seed: 1, steps: 4, guidance_scale: 3,
        webhook_url: hook, user: 'me', style: 'vivid', metadata: { tags: ['a', 'b'] },
      },
    },
    {
      label: 'POST /images/edits', base: 'edit', method: 'POST', path: '/images/edits', query: { async: 'true' }, stored: true,
      form: { model: models.edit, prompt: 'make it blue', n: '1', size: '512x512', response_format: 'url', webhook_url: hook, user: 'me' }, files: { image },
    },
    {
      label: 'POST /videos', base: 'video', method: 'POST', path: '/videos', stored: true,
      form: { model: models.video, prompt: 'waves', seconds: '2', size: '704x480', fps: '24', seed: '1', negative_prompt: 'rain', steps: '4', webhook_url: hook },
    },
    {
      label: 'POST /videos/generations', base: 'video', method: 'POST', path: '/videos/generations', stored: true,
      json: { model: models.video, prompt: 'waves', resolution: '704x480', duration: 2, fps: 24, seed: 1, negative_prompt: 'rain', steps: 4, webhook_url: hook },
    },
    {
      label: 'POST /chat/completions', base: 'chat', method: 'POST', path: '/chat/completions', stored: false,
      json: { messages: [{ role: 'system', content: 'be brief' }, { role: 'user', content: 'hi' }], max_tokens: 2, user: 'me', stop: ['zz'], seed: 1 },
    },
    { label: 'POST /completions', base: 'chat', method: 'POST', path: '/completions', stored: false, json: { prompt: ['hi', 'there'], max_tokens: 2, user: 'me', suffix: 'x' } },
    { label: 'GET /shared/v1/models/{id}', base: 'shared', method: 'GET', path: '/models/{id}', idParam: 'model', stored: false, shared: true },
    {
      label: 'POST /shared/v1/chat/completions', base: 'shared', method: 'POST', path: '/chat/completions', stored: false, shared: true,
      json: { model: `shared/${options.models.chat}`, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, user: 'me' },
    },
  ];
}

/** Every leaf of a JSON value with its path. */
function leaves(value: unknown, path: Path = []): Path[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => leaves(item, [...path, index]));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([name, item]) => leaves(item, [...path, name]));
  return [path];
}

function replaced(value: unknown, path: Path, text: string): unknown {
  if (path.length === 0) return text;
  const copy = (Array.isArray(value) ? [...value] : { ...(value as object) }) as Record<string | number, unknown>;
  copy[path[0]] = replaced(copy[path[0]], path.slice(1), text);
  return copy;
}

interface RestCase {
  label: string;
  url: string;
  method: string;
  json?: unknown;
  form?: Record<string, string>;
  files?: Record<string, Blob>;
  /** A 400 `invalid_request` naming this (null: naming nothing); undefined: any answer under 500. */
  refusedAs?: string | null;
  /** 503 is a fine answer too (the shared pool has no provider). */
  mayBeUnavailable?: boolean;
}

function casesOf(route: RestRoute, options: NulFuzzOptions, nul: () => string): RestCase[] {
  const base = options.deployments[route.base];
  const url = (id: string, query: Record<string, string> = route.query ?? {}, root = base) => {
    const search = new URLSearchParams(query).toString();
    return `${root}${route.path.replace('{id}', encodeURIComponent(id))}${search ? `?${search}` : ''}`;
  };
  const request = { method: route.method, json: route.json, form: route.form, files: route.files, mayBeUnavailable: route.shared };
  const cases: RestCase[] = [];
  if (!route.shared) {
    const slugBase = base.replace(/\/d\/[^/]+\/v1$/, `/d/${encodeURIComponent(`x${nul()}`)}/v1`);
    cases.push({ label: `${route.label}: slug`, url: url('req_0', route.query, slugBase), ...request, refusedAs: 'slug' });
  }
  if (route.idParam) cases.push({ label: `${route.label}: {id}`, url: url(nul()), ...request, refusedAs: route.idParam });
  for (const name of Object.keys(route.query ?? {})) {
    cases.push({ label: `${route.label}: ?${name}`, url: url('req_0', { ...route.query, [name]: nul() }), ...request, refusedAs: name });
  }
  const expected = (path: Path | null) => (route.stored ? (path ? param(path) : null) : undefined);
  if (route.json) {
    for (const path of leaves(route.json)) cases.push({ label: `${route.label}: ${param(path)}`, url: url('req_0'), ...request, json: replaced(route.json, path, nul()), refusedAs: expected(path) });
    cases.push({ label: `${route.label}: a key`, url: url('req_0'), ...request, json: { ...route.json, [nul()]: 'x' }, refusedAs: expected(null) });
    cases.push({ label: `${route.label}: an unknown field`, url: url('req_0'), ...request, json: { ...route.json, extra: { list: [nul()] } }, refusedAs: expected(['extra', 'list', 0]) });
  }
  if (route.form) {
    for (const name of Object.keys(route.form)) cases.push({ label: `${route.label}: ${name}`, url: url('req_0'), ...request, form: { ...route.form, [name]: nul() }, refusedAs: expected([name]) });
    cases.push({ label: `${route.label}: an unknown field`, url: url('req_0'), ...request, form: { ...route.form, extra: nul() }, refusedAs: expected(['extra']) });
  }
  return cases;
}

async function restCases(options: NulFuzzOptions, nul: () => string, failures: unknown[]): Promise<number> {
  let count = 0;
  for (const route of restRoutes(options)) {
    for (const testCase of casesOf(route, options, nul)) {
      count++;
      const { status, body } = await send(testCase, options.apiKey);
      const error = (body as { error?: { code?: string; param?: string | null } } | null)?.error;
      const refused = status === 400 && error?.code === 'invalid_request' && error.param === testCase.refusedAs;
      const answered = status < 500 || (testCase.mayBeUnavailable === true && status === 503);
      const ok = testCase.refusedAs === undefined ? answered && error?.code !== 'internal_error' : refused;
      if (!ok) failures.push({ label: testCase.label, url: testCase.url, expected: testCase.refusedAs === undefined ? 'under 500' : { param: testCase.refusedAs }, status, body });
    }
  }
  return count;
}

async function send(testCase: RestCase, apiKey: string): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}` };
  let body: BodyInit | undefined;
  if (testCase.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(testCase.json);
  } else if (testCase.form) {
    const form = new FormData();
    for (const [name, value] of Object.entries(testCase.form)) form.append(name, value);
    for (const [name, file] of Object.entries(testCase.files ?? {})) form.append(name, file, `${name}.png`);
    body = form;
  }
  const response = await fetch(testCase.url, { method: testCase.method, headers, body: testCase.method === 'GET' ? undefined : body, redirect: 'manual' });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) };
  } catch {
    return { status: response.status, body: text };
  }
}
