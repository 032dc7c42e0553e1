import net from 'node:net';
import type { Context } from 'koa';
import { OPERATOR_TOKEN } from '../capacity/support/graphql-client';
import { overWebSocket } from '../support/graphql-websocket';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { idempotencyKey } from '../../gateway/v1/media/media-body';
import { nulFuzzCases } from './support/nul-fuzz-cases';

const NUL = '\u0000';
const IMAGE = 'black-forest-labs/FLUX.1-schnell';
const EDIT = 'black-forest-labs/FLUX.1-Kontext-dev';
const VIDEO = 'Lightricks/LTX-Video';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4e00000000049454e44ae426082', 'hex');
const HOOK = 'http://127.0.0.1:9/hook';

interface GraphQLAnswer {
  status: number;
  body: { data?: unknown; errors?: Array<{ message: string; extensions?: { code?: string; param?: string | null } }> };
}

/**
 * PostgreSQL text and jsonb cannot hold U+0000. A NUL in any client string that may be stored
 * is bad input: GraphQL answers BAD_USER_INPUT naming the argument path, REST 400
 * `invalid_request` naming the field, never a 500 from the database; chat bodies, which are not
 * stored, pass through to the engine as they are.
 */
describe('NUL bytes', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  const deployments: Record<'chat' | 'image' | 'edit' | 'video', { id: string; slug: string; baseUrl: string }> = {} as never;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, webhooks: { allowInsecureLoopback: true } } });
    workspace = await test.createWorkspace();
    deployments.chat = await test.createDeployment(workspace);
    // External: no agent, so async media submissions stay queued (their records are what reaches PostgreSQL).
    deployments.image = await test.createDeployment(workspace, { modelId: IMAGE, provider: 'external' });
    deployments.edit = await test.createDeployment(workspace, { modelId: EDIT, provider: 'external' });
    deployments.video = await test.createDeployment(workspace, { modelId: VIDEO, provider: 'external' });
    await test.waitForReplicas(deployments.chat.id, 1);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const graphql = async (query: string, variables: Record<string, unknown> = {}, token = workspace.apiKey): Promise<GraphQLAnswer> => {
    const response = await fetch(`${test.url}/graphql`, {
      method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
    });
    return { status: response.status, body: await response.json() as GraphQLAnswer['body'] };
  };

  const rest = async (url: string, init: { method?: string; json?: unknown; form?: Record<string, string | Blob> } = {}) => {
    let body: BodyInit | undefined;
    const headers: Record<string, string> = { authorization: `Bearer ${workspace.apiKey}` };
    if (init.json !== undefined) {
      body = JSON.stringify(init.json);
      headers['content-type'] = 'application/json';
    } else if (init.form) {
      const form = new FormData();
      for (const [name, value] of Object.entries(init.form)) form.append(name, value);
      body = form;
    }
    const response = await fetch(url, { method: init.method ?? (body ? 'POST' : 'GET'), headers, body, redirect: 'manual' });
    const text = await response.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Not JSON: kept as text.
    }
    return { status: response.status, body: parsed };
  };

  const refusal = (answer: { status: number; body: any }) => ({ status: answer.status, code: answer.body?.error?.code, param: answer.body?.error?.param });

  describe('GraphQL', () => {
    const workspaceCases: Array<[string, string, Record<string, unknown>, string]> = [
      ['an ID literal', '{ deployment(id: "\\u0000") { id } }', {}, 'id'],
      ['an ID variable', 'query($id: ID!) { deployment(id: $id) { id } }', { id: NUL }, 'id'],
      ['a variable named otherwise than its argument', 'query($x: ID!) { request(id: $x) { id } }', { x: `req_${NUL}` }, 'id'],
      ['a variable\'s default value', 'query($id: ID! = "dep_\\u0000") { deployment(id: $id) { id } }', {}, 'id'],
      ['a literal in an input object', 'mutation { createApiKey(input: {name: "key\\u0000"}) { plaintext } }', {}, 'input.name'],
      ['a variable inside an input object literal', 'mutation($name: String!) { createApiKey(input: {name: $name}) { plaintext } }', { name: `a${NUL}` }, 'input.name'],
      ['a field of an input object variable', 'mutation($input: CreateStorageCredentialInput!) { createStorageCredential(input: $input) { id } }',
        { input: { name: 'bucket', region: 'us-east-1', bucket: `b${NUL}`, accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret' } }, 'input.bucket'],
      ['a webhook endpoint url', 'mutation { createWebhookEndpoint(input: {url: "http://127.0.0.1:9/\\u0000"}) { id } }', {}, 'input.url'],
      ['a webhook endpoint description', 'mutation($description: String!) { createWebhookEndpoint(input: {url: "http://127.0.0.1:9/", description: $description}) { id } }',
        { description: `d${NUL}` }, 'input.description'],
      ['a status filter', 'query($status: String) { requests(deploymentId: "dep_x", status: $status) { id } }', { status: NUL }, 'status'],
    ];
    const offer = { id: 'offer-1', gpuName: 'RTX 4090', gpuMemoryGb: 24, region: 'us-east', pricePerHour: 0.5, count: 1 };
    const operatorCases: Array<[string, string, Record<string, unknown>, string]> = [
      ['an item of a list of input objects', 'mutation($offers: [MarketOfferInput!]!) { setMarketOffers(offers: $offers) { id } }',
        { offers: [offer, { ...offer, id: `offer${NUL}` }] }, 'offers[1].id'],
      ['a nested value of a JSON argument', 'mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }',
        { spec: { id: 'acme/m', extra: { tags: ['ok', `t${NUL}`] } } }, 'spec.extra.tags[1]'],
      ['a key of a JSON argument', 'mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }', { spec: { id: 'acme/m', [`k${NUL}`]: 1 } }, 'spec'],
      ['a JSON literal', 'mutation { registerCatalogModel(spec: {id: "acme/\\u0000"}) { id } }', {}, 'spec.id'],
      ['a workspace id', 'mutation($workspaceId: ID!) { addCredit(workspaceId: $workspaceId, amount: 5) }', { workspaceId: `ws_${NUL}` }, 'workspaceId'],
    ];

    it.each([...workspaceCases.map((entry) => [...entry, 'workspace'] as const), ...operatorCases.map((entry) => [...entry, 'operator'] as const)])(
      '%s is BAD_USER_INPUT naming it, with HTTP 400', async (_label, query, variables, param, caller) => {
        const answer = await graphql(query, variables, caller === 'operator' ? OPERATOR_TOKEN : workspace.apiKey);
        expect({ status: answer.status, data: answer.body.data ?? null, errors: answer.body.errors }).toEqual({
          status: 400, data: null, errors: [{ message: expect.stringContaining('NUL'), locations: expect.anything(), extensions: { code: 'BAD_USER_INPUT', param } }],
        });
      });

    it('nothing was stored: no key, credential or endpoint with a NUL, and the deployments are untouched', async () => {
      const answer = await graphql('{ apiKeys { name } storageCredentials { bucket } webhookEndpoints { url } }');
      expect(answer.body.data).toEqual({ apiKeys: [{ name: 'test key' }], storageCredentials: [], webhookEndpoints: [] });
    });

    it.each([
      ['an ID literal', { query: '{ deployment(id: "\\u0000") { id } }' }, 'id'],
      ['an input object variable', { query: 'mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { plaintext } }', variables: { input: { name: NUL } } }, 'input.name'],
      ['a subscription argument', { query: 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { replicaId } }', variables: { id: NUL } }, 'deploymentId'],
    ])('over graphql-ws: %s is BAD_USER_INPUT naming it', async (_label, payload, param) => {
      // A subscription that is not refused keeps running: stop waiting after a while.
      const outcome = await overWebSocket(test.url, `Bearer ${workspace.apiKey}`, payload, { untilMs: 3_000 });
      expect(outcome).toEqual({
        closed: null,
        messages: [{ type: 'error', payload: [{ message: expect.stringContaining('NUL'), locations: expect.anything(), extensions: { code: 'BAD_USER_INPUT', param } }] }],
      });
    });

    it('over graphql-ws: a NUL in the bearer token of connectionParams is refused like any bad key', async () => {
      const outcome = await overWebSocket(test.url, `Bearer mk-${NUL}`, { query: '{ deployments { id } }' });
      expect(outcome.closed?.code).toBe(4403);
    });
  });

  describe('REST /v1', () => {
    const at = (deployment: keyof typeof deployments, path: string) => `${deployments[deployment].baseUrl}${path}`;

    it.each([
      ['GET /requests/{id}', 'image', '/requests/%00', 'GET'],
      ['GET /requests/{id} with the NUL inside', 'image', '/requests/req_ab%00cd', 'GET'],
      ['POST /requests/{id}/cancel', 'image', '/requests/req_%00/cancel', 'POST'],
      ['GET /videos/{id}', 'video', '/videos/%00', 'GET'],
      ['GET /videos/{id}/content', 'video', '/videos/req_%00/content', 'GET'],
      ['POST /videos/{id}/cancel', 'video', '/videos/req_%00/cancel', 'POST'],
    ] as const)('%s: 400 naming id', async (_label, deployment, path, method) => {
      expect(refusal(await rest(at(deployment, path), { method }))).toEqual({ status: 400, code: 'invalid_request', param: 'id' });
    });

    it('GET /models/{id}: 400 naming model', async () => {
      expect(refusal(await rest(at('chat', '/models/meta%00')))).toEqual({ status: 400, code: 'invalid_request', param: 'model' });
    });

    it.each([
      ['GET /d/{slug}/v1/models', 'GET', '/models'],
      ['POST /d/{slug}/v1/chat/completions', 'POST', '/chat/completions'],
      ['POST /d/{slug}/v1/images/generations', 'POST', '/images/generations'],
    ])('a deployment slug in the base URL, %s: 400 naming slug', async (_label, method, path) => {
      expect(refusal(await rest(`${test.url}/d/abc%00/v1${path}`, { method }))).toEqual({ status: 400, code: 'invalid_request', param: 'slug' });
    });

    it.each([
      ['prompt', { prompt: `a${NUL}cat` }, 'prompt'],
      ['negative_prompt', { negative_prompt: NUL }, 'negative_prompt'],
      ['webhook_url', { webhook_url: `${HOOK}${NUL}` }, 'webhook_url'],
      ['model', { model: `${IMAGE}${NUL}` }, 'model'],
      ['a string deep in an unknown field', { metadata: { tags: ['ok', `x${NUL}`] } }, 'metadata.tags[1]'],
      ['a key of the body', { [`style${NUL}`]: 'vivid' }, null],
    ])('POST /images/generations?async=true, JSON %s: 400 naming it', async (_label, fields, param) => {
      const answer = await rest(at('image', '/images/generations?async=true'), { json: { model: IMAGE, prompt: 'a cat', size: '512x512', ...fields } });
      expect(refusal(answer)).toEqual({ status: 400, code: 'invalid_request', param });
      expect(answer.body.error.message).toContain('NUL');
    });

    it.each([
      ['prompt', { prompt: NUL }, 'prompt'],
      ['negative_prompt', { negative_prompt: `n${NUL}` }, 'negative_prompt'],
      ['webhook_url', { webhook_url: `${HOOK}?${NUL}` }, 'webhook_url'],
    ])('POST /videos/generations, JSON %s: 400 naming it', async (_label, fields, param) => {
      const answer = await rest(at('video', '/videos/generations'), { json: { model: VIDEO, prompt: 'waves', resolution: '704x480', duration: 2, fps: 24, ...fields } });
      expect(refusal(answer)).toEqual({ status: 400, code: 'invalid_request', param });
    });

    it.each([
      ['prompt', { prompt: `edit${NUL}` }, 'prompt'],
      ['webhook_url', { webhook_url: `${HOOK}${NUL}` }, 'webhook_url'],
      ['size', { size: `512x512${NUL}` }, 'size'],
    ])('POST /images/edits?async=true, multipart %s: 400 naming it', async (_label, fields, param) => {
      const answer = await rest(at('edit', '/images/edits?async=true'), { form: { model: EDIT, prompt: 'edit', image: new Blob([PNG], { type: 'image/png' }), ...fields } });
      expect(refusal(answer)).toEqual({ status: 400, code: 'invalid_request', param });
    });

    it.each([
      ['prompt', { prompt: `w${NUL}` }, 'prompt'],
      ['negative_prompt', { negative_prompt: NUL }, 'negative_prompt'],
      ['webhook_url', { webhook_url: `${HOOK}${NUL}` }, 'webhook_url'],
      ['an unknown field', { user: NUL }, 'user'],
    ])('POST /videos, multipart %s: 400 naming it', async (_label, fields, param) => {
      const answer = await rest(at('video', '/videos'), { form: { model: VIDEO, prompt: 'waves', seconds: '2', size: '704x480', fps: '24', ...fields } });
      expect(refusal(answer)).toEqual({ status: 400, code: 'invalid_request', param });
    });

    it.each([
      ['GET /requests?status=', 'image', '/requests?status=%00', 'status'],
      ['GET /requests?limit=', 'image', '/requests?limit=%00', 'limit'],
      ['GET /videos?limit=', 'video', '/videos?limit=1%00', 'limit'],
      ['GET /videos/{id}/content?variant=', 'video', '/videos/req_0/content?variant=%00', 'variant'],
    ] as const)('query string %s: 400 naming it', async (_label, deployment, path, param) => {
      expect(refusal(await rest(at(deployment, path)))).toEqual({ status: 400, code: 'invalid_request', param });
    });

    it('no request record was stored by any of them', async () => {
      for (const deployment of ['image', 'edit', 'video'] as const) {
        expect((await rest(at(deployment, '/requests'))).body).toEqual({ object: 'list', data: [] });
      }
    });

    it('Idempotency-Key and Authorization: a NUL cannot arrive in a header (node refuses it, 400); the key reader refuses one anyway', async () => {
      const raw = async (header: string) => await new Promise<string>((resolve, reject) => {
        const socket = net.connect(Number(new URL(test.url).port), '127.0.0.1', () => {
          socket.write(`POST /d/${deployments.image.slug}/v1/images/generations?async=true HTTP/1.1\r\nHost: x\r\n${header}\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`);
        });
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
      });
      expect(await raw(`authorization: Bearer ${workspace.apiKey}\r\nidempotency-key: a${NUL}b`)).toMatch(/^HTTP\/1\.1 400 /);
      expect(await raw(`authorization: Bearer mk-${NUL}`)).toMatch(/^HTTP\/1\.1 400 /);
      const context = { get: (name: string) => (name === 'idempotency-key' ? `key${NUL}` : '') } as unknown as Context;
      expect(() => idempotencyKey(context)).toThrow(expect.objectContaining({ code: 'invalid_request', param: 'Idempotency-Key' }));
    });

    it('chat bodies are not stored: a NUL in a message or in user passes through to the engine; a NUL model is a mismatch', async () => {
      const chat = await rest(at('chat', '/chat/completions'), { json: { messages: [{ role: 'user', content: `hi${NUL}there` }], user: `u${NUL}`, max_tokens: 2 } });
      expect(chat.status).toBe(200);
      expect(chat.body.object).toBe('chat.completion');
      const completion = await rest(at('chat', '/completions'), { json: { prompt: `a${NUL}b`, max_tokens: 2 } });
      expect(completion.status).toBe(200);
      expect(refusal(await rest(at('chat', '/chat/completions'), { json: { model: NUL, messages: [{ role: 'user', content: 'hi' }] } })))
        .toEqual({ status: 400, code: 'model_mismatch', param: 'model' });
    });
  });

  /**
   * Finds the next entry point: every argument of every operation in the schema (introspected
   * now, so new operations are covered without touching this test) that a string can be sent
   * in (String, ID, dates, decimals, JSON values and keys), and every /v1 route's path ids,
   * query parameters and body fields, each given a NUL (seeded, varied strings) one at a time.
   * GraphQL must answer BAD_USER_INPUT naming the argument path, stored REST bodies 400 naming
   * the field; nothing may be a 5xx or INTERNAL_SERVER_ERROR.
   */
  it('fuzz: a NUL in any GraphQL argument or /v1 field is refused, never a 5xx', async () => {
    const cases = await nulFuzzCases({
      url: test.url, apiKey: workspace.apiKey, operatorToken: OPERATOR_TOKEN, seed: 0x5eed,
      deployments: {
        chat: deployments.chat.baseUrl, image: deployments.image.baseUrl, edit: deployments.edit.baseUrl, video: deployments.video.baseUrl, shared: `${test.url}/shared/v1`,
      },
      models: { chat: test.server.controlPlane.catalog.defaultChatModel().id, image: IMAGE, edit: EDIT, video: VIDEO }, png: PNG, hook: HOOK,
    });
    expect(cases.graphql).toBeGreaterThan(60);
    expect(cases.rest).toBeGreaterThan(60);
    expect(cases.failures).toEqual([]);
  });
});
