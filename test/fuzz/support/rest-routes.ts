import fc from 'fast-check';
import { hostileString, objectOf } from './hostile-values';
import { callerArbitrary, encodeSegment, rawSegment, type Caller, type HttpCase, type PathId } from './http-cases';
import { bodyArbitrary, bodyFormArbitrary, field, jsonContentType, refuseIntegersIn, serializeBody, type FieldSpec } from './json-bodies';
import { BODY_LIMITS, HOOK, type FuzzTarget } from './fuzz-target';

const shortText = fc.string({ maxLength: 16 });
const prompt = fc.string({ minLength: 1, maxLength: 24 }).filter((text) => text.trim() !== '');
const ROLES = ['system', 'developer', 'user', 'assistant', 'tool', 'function'];

const message = fc.oneof(
  fc.record({ role: fc.constantFrom(...ROLES), content: shortText }),
  fc.record({
    role: fc.constant('user'),
    content: fc.array(fc.oneof(
      fc.record({ type: fc.constant('text'), text: shortText }),
      fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: fc.constant('data:image/png;base64,iVBORw0KGgo=') }) }),
    ), { maxLength: 2 }),
  }),
  fc.constant({ role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }] }),
  fc.record({ role: fc.constant('tool'), content: shortText, tool_call_id: fc.constant('call_1') }),
);

/** max_tokens the CPU engine would honour beyond 4 become one it refuses: valid cases stay a few tokens. */
const tameTokens = refuseIntegersIn(5, 65_536, 65_537);

/** The sampling and pass-through fields chat and completions share. */
function textFields(): FieldSpec[] {
  const unit = (low: number, high: number) => fc.double({ min: low, max: high, noNaN: true });
  return [
    field('max_tokens', fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 4 })), { near: [0, -1, 1.5, '2', 65_537, 2 ** 53, 1e21, true], tame: tameTokens }),
    field('n', fc.oneof(fc.constant(undefined), fc.integer({ min: 1, max: 2 })), { near: [0, 128, 129, 1.5, '1', -1] }),
    field('stream', fc.oneof(fc.constant(undefined), fc.boolean()), { near: ['true', 1, 0, 'false'] }),
    field('stream_options', fc.oneof(fc.constant(undefined), fc.record({ include_usage: fc.boolean() })), { near: [{}, { include_usage: 'yes' }, [], 'include_usage'] }),
    field('temperature', fc.oneof(fc.constant(undefined), unit(0, 2)), { near: [-0.0001, 2.0001, '1', 1e309] }),
    field('top_p', fc.oneof(fc.constant(undefined), unit(0, 1)), { near: [-0.1, 1.1, '0.5'] }),
    field('frequency_penalty', fc.oneof(fc.constant(undefined), unit(-2, 2)), { near: [-2.1, 2.1] }),
    field('presence_penalty', fc.oneof(fc.constant(undefined), unit(-2, 2)), { near: [-2.1, 2.1] }),
    field('stop', fc.oneof(fc.constant(undefined), shortText, fc.array(shortText, { maxLength: 4 })), { near: [[], ['a', 'b', 'c', 'd', 'e'], [1], [null], ''] }),
    field('seed', fc.oneof(fc.constant(undefined), fc.integer()), { near: [2 ** 53, -(2 ** 53), 1.5, '7'] }),
    field('user', fc.oneof(fc.constant(undefined), shortText)),
    field('logprobs', fc.oneof(fc.constant(undefined), fc.boolean())),
    field('response_format', fc.oneof(fc.constant(undefined), fc.constantFrom({ type: 'text' }, { type: 'json_object' }))),
    field('tools', fc.oneof(fc.constant(undefined), fc.constant([{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }]))),
  ];
}

export function chatFields(model: string | fc.Arbitrary<string | undefined>): FieldSpec[] {
  const models = typeof model === 'string' ? fc.constantFrom(undefined, model) : model;
  return [
    field('messages', fc.array(message, { minLength: 1, maxLength: 3 }), {
      near: [[], [{}], [null], [[]], [{ role: 'user' }], [{ role: 'robot', content: 'x' }], [{ role: 'USER', content: 'x' }], [{ content: 'x' }], 'hi', { role: 'user', content: 'x' }],
      hostile: fc.oneof(
        fc.array(fc.record({ role: fc.oneof(fc.constantFrom(...ROLES), hostileString), content: fc.oneof(shortText, hostileString) }), { minLength: 1, maxLength: 3 }),
        fc.array(fc.oneof(message, fc.anything()), { minLength: 1, maxLength: 3 }),
      ),
    }),
    field('model', models, { near: ['', 'gpt-4', 'META-LLAMA/LLAMA-3.1-8B-INSTRUCT', 'shared/meta-llama/Llama-3.1-8B-Instruct', 'shared/', 'shared/nope'] }),
    field('max_completion_tokens', fc.constant(undefined), { near: [0, 3, 65_537, '3'], tame: tameTokens }),
    ...textFields(),
  ];
}

export function completionFields(model: string): FieldSpec[] {
  return [
    field('prompt', fc.oneof(shortText, fc.array(shortText, { minLength: 1, maxLength: 3 }), fc.constant([1, 2, 3]), fc.constant([[1, 2], [3]])), {
      near: [[], [''], [1, 'a'], [[1], 'a'], [[]], [[1.5]], [-1], [null], { text: 'x' }, ['a'.repeat(10), 7]],
    }),
    field('model', fc.constantFrom(undefined, model), { near: ['', 'Qwen/Qwen2.5-7B'] }),
    field('echo', fc.oneof(fc.constant(undefined), fc.boolean())),
    field('suffix', fc.oneof(fc.constant(undefined), shortText)),
    field('best_of', fc.constant(undefined), { near: [0, 1, 2, 'x'] }),
    ...textFields(),
  ];
}

const WEBHOOKS = [
  'http://example.com/hook', 'https://10.0.0.1/hook', 'https://user:pw@hooks.invalid/', 'https://hooks.invalid/x', 'ftp://127.0.0.1/', 'https://localhost/',
  'javascript:alert(1)', 'https://[::1]/', 'https://169.254.169.254/latest/meta-data', 'https://single/', 'http://127.0.0.1:9/hook\n', '//127.0.0.1/', 'https://', `https://x.invalid/${'a'.repeat(3000)}`,
];

export function imageFields(model: string, sizes: readonly string[], inForm: boolean): FieldSpec[] {
  const number = (arbitrary: fc.Arbitrary<number>) => (inForm ? arbitrary.map(String) : arbitrary);
  return [
    field('model', fc.constant(model), { near: ['', 'black-forest-labs/FLUX.1-schnell', 'meta-llama/Llama-3.1-8B-Instruct', 'Lightricks/LTX-Video', `${model} `, model.toUpperCase()] }),
    field('prompt', prompt, { near: ['', '   ', 'a'.repeat(32_001)] }),
    field('n', fc.oneof(fc.constant(undefined), number(fc.integer({ min: 1, max: 2 }))), { near: [0, 11, -1, 1.5, '2', ' 2', '0x2', '2e0'], tame: refuseIntegersIn(3, 10, 11) }),
    field('size', fc.oneof(fc.constant(undefined), fc.constantFrom(...sizes, 'auto')), { near: ['256x256', '512X512', '512x512 ', 'x', '0x0', '99999x99999', '1024x768', '512*512', 'auto '] }),
    field('response_format', fc.constantFrom(undefined, 'url', 'b64_json'), { near: ['URL', 'b64', '', 'json'] }),
    field('negative_prompt', fc.oneof(fc.constant(undefined), shortText)),
    field('seed', fc.oneof(fc.constant(undefined), number(fc.nat())), { near: [-1, 2 ** 53, 1.5, 'seven'] }),
    field('steps', fc.oneof(fc.constant(undefined), number(fc.integer({ min: 1, max: 4 }))), { near: [0, 501, -1, 2.5], tame: refuseIntegersIn(5, 500, 501) }),
    field('guidance_scale', fc.oneof(fc.constant(undefined), number(fc.double({ min: 0, max: 100, noNaN: true }))), { near: [-0.1, 100.1, 'NaN'] }),
    field('storage_credential_id', fc.constant(undefined), { near: [0, 1, 2 ** 31, -1, '1', 1.5] }),
    field('webhook_url', fc.constantFrom(undefined, HOOK), { near: WEBHOOKS }),
    field('user', fc.oneof(fc.constant(undefined), shortText)),
    field('style', fc.constantFrom(undefined, 'vivid', 'natural')),
    field('quality', fc.constantFrom(undefined, 'hd')),
  ];
}

/** Valid clips stay short (at most 2 s at 24 fps): longer ones and faster rates become values the server refuses. */
export function videoFields(model: string, sizes: readonly string[], route: 'videos' | 'videos/generations'): FieldSpec[] {
  const inForm = route === 'videos';
  const number = (arbitrary: fc.Arbitrary<number>) => (inForm ? arbitrary.map(String) : arbitrary);
  const seconds = number(fc.constantFrom(0.5, 1, 2));
  return [
    field('model', fc.constant(model), { near: ['', 'Wan-AI/Wan2.1-T2V-1.3B', 'black-forest-labs/FLUX.1-schnell', 'nope/nope'] }),
    field('prompt', prompt, { near: ['', ' ', 'a'.repeat(32_001)] }),
    field(inForm ? 'size' : 'resolution', inForm ? fc.constantFrom(...sizes) : fc.constantFrom(undefined, ...sizes), { near: ['704X480', '704x481', '0x0', '1x1', '704x480x2', ' 704x480', '99999x99999'] }),
    field(inForm ? 'seconds' : 'duration', inForm ? seconds : fc.oneof(fc.constant(undefined), seconds), { near: [0, 0.05, 120.5, 121, -1, '2', 'two', 1e309], tame: refuseUnlessShort(2) }),
    field('fps', fc.oneof(fc.constant(undefined), number(fc.constantFrom(8, 12, 24))), { near: [0, 121, -24, 23.5, '24', 'NaN'], tame: refuseUnlessShort(24) }),
    field('seed', fc.oneof(fc.constant(undefined), number(fc.nat())), { near: [-1, 2 ** 53] }),
    field('negative_prompt', fc.oneof(fc.constant(undefined), shortText)),
    field('steps', fc.oneof(fc.constant(undefined), number(fc.integer({ min: 1, max: 4 }))), { near: [0, 501], tame: refuseIntegersIn(5, 500, 501) }),
    field('webhook_url', fc.constantFrom(undefined, HOOK), { near: WEBHOOKS }),
    field('storage_credential_id', fc.constant(undefined), { near: [0, 1, '1', -5] }),
    field('input_reference', fc.constant(undefined), { near: ['https://example.invalid/a.png', 'data:image/png;base64,iVBORw0KGgo='] }),
  ];
}

/** Numbers (or numeric strings) above `limit` that the server would accept (≤ 120) become 121: refused. */
function refuseUnlessShort(limit: number) {
  return (value: unknown) => {
    const number = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    return typeof number === 'number' && number > limit && number <= 120 ? 121 : value;
  };
}

/** `?async=` values: true/false/absent mostly, otherwise spellings the route must refuse. */
const asyncQuery = fc.oneof(
  { arbitrary: fc.constantFrom('', '?async=true', '?async=false', '?async=1'), weight: 8 },
  { arbitrary: fc.constantFrom('?async=TRUE', '?async=yes', '?async=', '?async', '?async=true&async=false', '?async=%zz', '?async=%00', '?async=tru%65', '?&&=&'), weight: 1 },
);

const idempotencyKeys = fc.oneof(
  { arbitrary: fc.constant(undefined), weight: 8 },
  {
    arbitrary: fc.oneof(
      fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((code) => String.fromCharCode(code)), minLength: 1, maxLength: 40 }),
      fc.constantFrom('a b', 'x'.repeat(256), 'é', '\t', ' key'),
    ),
    weight: 1,
  },
);

/** A JSON route's cases: a body of its fields, sent well-formed or broken, with the content type and caller varied. */
export function jsonRouteCases(options: {
  route: string; path: string; specs: FieldSpec[]; caller: Caller; query?: fc.Arbitrary<string>; idempotency?: boolean;
}): fc.Arbitrary<HttpCase> {
  return fc.record({
    body: bodyArbitrary(options.specs),
    form: bodyFormArbitrary(BODY_LIMITS.json),
    contentType: jsonContentType,
    caller: callerArbitrary(options.caller),
    query: options.query ?? fc.constant(''),
    idempotencyKey: options.idempotency ? idempotencyKeys : fc.constant(undefined),
  }).map(({ body, form, contentType, caller, query, idempotencyKey }) => ({
    route: options.route, method: 'POST', path: `${options.path}${query}`, caller,
    headers: objectOf([...(contentType ? [['content-type', contentType] as [string, string]] : []), ...(idempotencyKey ? [['idempotency-key', idempotencyKey] as [string, string]] : [])]) as Record<string, string>,
    body: serializeBody(body, form),
  }));
}

export function textRouteCases(target: FuzzTarget): fc.Arbitrary<HttpCase> {
  const base = `/d/${target.text.slug}/v1`;
  return fc.oneof(
    jsonRouteCases({ route: 'POST /chat/completions', path: `${base}/chat/completions`, specs: chatFields(target.models.chat), caller: 'owner' }),
    jsonRouteCases({ route: 'POST /completions', path: `${base}/completions`, specs: completionFields(target.models.chat), caller: 'owner' }),
  );
}

export function sharedChatCases(target: FuzzTarget): fc.Arbitrary<HttpCase> {
  const model = fc.oneof({ arbitrary: fc.constant(`shared/${target.models.chat}`), weight: 8 }, { arbitrary: fc.constantFrom(undefined, target.models.chat, `shared/${target.models.image}`), weight: 1 });
  return jsonRouteCases({ route: 'POST /shared/v1/chat/completions', path: '/shared/v1/chat/completions', specs: chatFields(model), caller: 'guest' });
}

export function mediaJsonCases(target: FuzzTarget, sizes: { image: readonly string[]; video: readonly string[] }): fc.Arbitrary<HttpCase> {
  const image = `/d/${target.image.slug}/v1`;
  const video = `/d/${target.video.slug}/v1`;
  return fc.oneof(
    jsonRouteCases({ route: 'POST /images/generations', path: `${image}/images/generations`, specs: imageFields(target.models.image, sizes.image, false), caller: 'owner', query: asyncQuery, idempotency: true }),
    jsonRouteCases({ route: 'POST /videos/generations', path: `${video}/videos/generations`, specs: videoFields(target.models.video, sizes.video, 'videos/generations'), caller: 'owner', idempotency: true }),
    // JSON where a form is required.
    jsonRouteCases({ route: 'POST /images/edits (JSON)', path: `${image}/images/edits`, specs: imageFields(target.models.image, sizes.image, false), caller: 'owner', query: asyncQuery }),
  );
}

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'];

const pathId: fc.Arbitrary<PathId> = fc.oneof(
  { arbitrary: fc.nat().map((recordIndex): PathId => ({ recordIndex })), weight: 4 },
  { arbitrary: fc.constantFrom('req_000000000000000000000000', 'req_', 'req_zz', 'REQ_0').map((text): PathId => ({ text })), weight: 2 },
  { arbitrary: hostileString.map((text): PathId => ({ text: encodeSegment(text) })), weight: 3 },
  { arbitrary: rawSegment.map((text): PathId => ({ text })), weight: 3 },
);

/**
 * Every route that is not a JSON or form submission (models, request records, videos), on the
 * right deployment or another, with any method, path ids and query strings; plus paths next to
 * the real ones (unknown routes, slugs that cannot exist, broken percent-encoding).
 */
export function readRouteCases(target: FuzzTarget): fc.Arbitrary<HttpCase> {
  const slugs = fc.oneof(
    { arbitrary: fc.constantFrom(target.text.slug, target.image.slug, target.video.slug), weight: 6 },
    { arbitrary: fc.constantFrom(target.shared.slug, 'nope', 'A', 'x'.repeat(65), '-', encodeSegment('é')), weight: 1 },
    { arbitrary: rawSegment, weight: 1 },
  );
  const query = fc.oneof(
    { arbitrary: fc.constant(''), weight: 4 },
    {
      arbitrary: fc.tuple(fc.constantFrom('status', 'limit', 'variant', 'async', 'x'), fc.oneof(fc.constantFrom('queued', 'succeeded', '1', '200', '201', '0', '-1', '1.5', '1e2', ' 5', 'video', 'thumbnail'), rawSegment, hostileString.map(encodeSegment)))
        .chain((first) => fc.array(fc.tuple(fc.constantFrom('status', 'limit', 'variant', 'x'), rawSegment), { maxLength: 2 }).map((more) => [first, ...more]))
        .map((pairs) => `?${pairs.map(([name, value]) => `${name}=${value}`).join('&')}`),
      weight: 4,
    },
    { arbitrary: fc.constantFrom('?', '??', '?=', '?&', '?limit', '?limit=5&limit=6', '?status[]=queued', '?status[a]=b', '?%zz=1'), weight: 1 },
  );
  const routes = fc.constantFrom(
    '/models', '/models/{id}', '/requests', '/requests/{id}', '/requests/{id}/cancel', '/videos', '/videos/{id}', '/videos/{id}/content', '/videos/{id}/cancel',
    '/models/meta-llama/Llama-3.1-8B-Instruct', '/models/meta-llama%2FLlama-3.1-8B-Instruct', '/requests/{id}/nope', '/videos/{id}/content/x', '', '/', '//models', '/chat',
    '/images', '/images/generations/x', '/embeddings', '/files', '/requests/', '/videos/',
  );
  const deploymentCase = fc.record({
    method: fc.oneof({ arbitrary: fc.constantFrom('GET', 'POST'), weight: 6 }, { arbitrary: fc.constantFrom(...METHODS), weight: 1 }),
    slug: slugs, route: routes, id: pathId, query, caller: callerArbitrary('owner'),
  }).map(({ method, slug, route, id, query, caller }): HttpCase => ({
    route: `${method} /d/{slug}/v1${route}`, method, path: `/d/${slug}/v1${route}${query}`, id: route.includes('{id}') ? id : undefined, caller,
  }));
  const sharedCase = fc.record({
    method: fc.oneof({ arbitrary: fc.constant('GET'), weight: 6 }, { arbitrary: fc.constantFrom(...METHODS), weight: 1 }),
    route: fc.constantFrom('/models', '/models/{id}', '/models/shared/{id}', '', '/', '/completions', '/requests', '/models/shared%2F{id}'),
    id: fc.oneof(fc.constant<PathId>({ text: encodeSegment(target.models.chat) }), fc.constant<PathId>({ text: target.models.chat }), pathId),
    caller: callerArbitrary('guest'),
  }).map(({ method, route, id, caller }): HttpCase => ({ route: `${method} /shared/v1${route}`, method, path: `/shared/v1${route}`, id: route.includes('{id}') ? id : undefined, caller }));
  const strayCase = fc.record({
    method: fc.constantFrom(...METHODS),
    path: fc.oneof(
      fc.constantFrom('/v1/models', '/v1/chat/completions', '/d', '/d/', '/d//v1/models', '/d/x/v2/models', '/shared', '/shared/v2/models', '/files/x', '/files/managed/x?signature=1', '/graphql/x', '/healthz/x', '/%zz', '/..%2f..%2fetc', '/d/%zz/v1/models', '/d/a%2Fb/v1/models'),
      fc.array(rawSegment, { minLength: 1, maxLength: 4 }).map((segments) => `/${segments.join('/')}`),
    ),
    caller: callerArbitrary('owner'),
  }).map(({ method, path, caller }): HttpCase => ({ route: `${method} (other paths)`, method, path, caller }));
  return fc.oneof({ arbitrary: deploymentCase, weight: 6 }, { arbitrary: sharedCase, weight: 2 }, { arbitrary: strayCase, weight: 1 });
}
