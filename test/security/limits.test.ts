import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, graphqlAs, openAIError, OPERATOR_TOKEN, rawRequest, type HttpAnswer } from './support/security-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const EMBEDDING_MODEL = 'BAAI/bge-large-en-v1.5';
const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
/** MAX_BODY_BYTES of this server: small, so over-size bodies are cheap to send. */
const MAX_BODY_BYTES = 64 * 1024;
/** The local GPU's price: 360 $/h is 0.1 $/s, so a little credit runs out in seconds. */
const LOCAL_PRICE_PER_HOUR = 360;

type Endpoint = { id: string; slug: string; baseUrl: string };

/**
 * What a caller may make the server do is bounded: bodies over the limit are 413 (declared or
 * streamed), headers over Node's limit 431, malformed JSON 400 naming the problem, never a 5xx;
 * a prepaid workspace without credit gets 402 on every text endpoint until it is topped up,
 * and again once GPU time has used the credit up; a key's RPM holds under a parallel burst.
 */
describe('limits: body and header size, malformed JSON, prepaid credit, RPM under bursts', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let chat: Endpoint;
  let embedding: Endpoint;
  let image: Endpoint;
  let operator: ReturnType<typeof graphqlAs>;

  const chatBody = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };
  const bearer = (key: string) => `Bearer ${key}`;

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: { operatorToken: OPERATOR_TOKEN, localPricePerHour: LOCAL_PRICE_PER_HOUR, meteringIntervalMs: 100, apiKeyCacheTtlMs: 1_000 },
      gateway: { maxBodyBytes: MAX_BODY_BYTES },
    });
    operator = graphqlAs(test.url, OPERATOR_TOKEN);
    workspace = await test.createWorkspace();
    chat = await test.createDeployment(workspace, { priceCapPerHour: LOCAL_PRICE_PER_HOUR });
    embedding = await test.createDeployment(workspace, { modelId: EMBEDDING_MODEL, provider: 'external' });
    image = await test.createDeployment(workspace, { modelId: IMAGE_MODEL, provider: 'external' });
    await test.waitForReplicas(chat.id, 1);
  });

  afterAll(async () => {
    await test?.stop();
  });

  describe('request size', () => {
    /** [route, url, body fields that take the padding]: every JSON route of the server. */
    const jsonRoutes = (): Array<[string, string, (padding: string) => unknown]> => [
      ['chat/completions (fast lane)', `${chat.baseUrl}/chat/completions`, (padding) => ({ messages: [{ role: 'user', content: padding }], max_tokens: 2 })],
      ['completions (fast lane)', `${chat.baseUrl}/completions`, (padding) => ({ prompt: padding, max_tokens: 2 })],
      ['embeddings', `${embedding.baseUrl}/embeddings`, (padding) => ({ input: padding })],
      ['images/generations', `${image.baseUrl}/images/generations?async=true`, (padding) => ({ model: IMAGE_MODEL, prompt: padding, size: '512x512' })],
      ['shared/v1/chat/completions', `${test.url}/shared/v1/chat/completions`, (padding) => ({ model: `shared/${CHAT_MODEL}`, messages: [{ role: 'user', content: padding }] })],
    ];

    it('a body over MAX_BODY_BYTES is 413 body_too_large naming the limit, declared or streamed without a length', async () => {
      const outcomes = [];
      for (const [route, url, body] of jsonRoutes()) {
        const payload = Buffer.from(JSON.stringify(body('x'.repeat(MAX_BODY_BYTES + 1))));
        const declared = await call('POST', url, bearer(workspace.apiKey), payload);
        const streamed = await fetch(url, {
          method: 'POST', headers: { authorization: bearer(workspace.apiKey), 'content-type': 'application/json' }, duplex: 'half',
          body: new ReadableStream({
            start(controller) {
              for (let offset = 0; offset < payload.length; offset += 4096) controller.enqueue(payload.subarray(offset, offset + 4096));
              controller.close();
            },
          }),
        } as RequestInit);
        const streamedText = await streamed.text();
        outcomes.push({
          route, declared: openAIError(declared), namesLimit: declared.json?.error?.message.includes(String(MAX_BODY_BYTES)),
          streamed: { status: streamed.status, code: JSON.parse(streamedText).error?.code },
        });
      }
      expect(outcomes).toEqual(jsonRoutes().map(([route]) => ({
        route, declared: { status: 413, type: 'invalid_request_error', code: 'body_too_large', param: null }, namesLimit: true,
        streamed: { status: 413, code: 'body_too_large' },
      })));
    });

    it('a body just under the limit is read and answered (the control)', async () => {
      const answer = await call('POST', `${chat.baseUrl}/chat/completions`, bearer(workspace.apiKey),
        { messages: [{ role: 'user', content: 'x '.repeat((MAX_BODY_BYTES - 200) / 2) }], max_tokens: 2 });
      expect(answer.status).toBe(200);
    });

    it('a /graphql body over its limit is 413, never read into a 5xx', async () => {
      const answer = await call('POST', `${test.url}/graphql`, bearer(workspace.apiKey), { query: '{ deployments { id } }', variables: { padding: 'x'.repeat(5 * 1024 * 1024) } });
      expect(openAIError(answer)).toEqual({ status: 413, type: 'invalid_request_error', code: 'body_too_large', param: null });
    });

    it('headers over Node\'s limit (16 KiB) are 431 on every kind of route, before any handler runs', async () => {
      const host = new URL(test.url).host;
      const requests: Array<[string, string]> = [
        ['chat/completions (fast lane)', `POST /d/${chat.slug}/v1/chat/completions HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${workspace.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Padding: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n{}`],
        ['models', `GET /d/${chat.slug}/v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${workspace.apiKey}\r\nX-Padding: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`],
        ['graphql', `POST /graphql HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${workspace.apiKey}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nX-Padding: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n{}`],
        ['healthz', `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Padding: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`],
        ['an over-long Authorization', `GET /d/${chat.slug}/v1/models HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer mk-${'A'.repeat(20_000)}\r\nConnection: close\r\n\r\n`],
        ['many small headers', `GET /healthz HTTP/1.1\r\nHost: ${host}\r\n${Array.from({ length: 2_000 }, (_, index) => `X-H${index}: ${'v'.repeat(16)}`).join('\r\n')}\r\nConnection: close\r\n\r\n`],
        ['an over-long URL', `GET /d/${chat.slug}/v1/models?${'a'.repeat(20_000)} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${workspace.apiKey}\r\nConnection: close\r\n\r\n`],
      ];
      const outcomes = [];
      for (const [what, request] of requests) outcomes.push({ what, status: (await rawRequest(test.url, request)).status });
      expect(outcomes).toEqual(requests.map(([what]) => ({ what, status: 431 })));
      // 8 KiB of headers is within the limit (the control).
      const within = await rawRequest(test.url, `GET /healthz HTTP/1.1\r\nHost: ${host}\r\nX-Padding: ${'a'.repeat(8_000)}\r\nConnection: close\r\n\r\n`);
      expect(within.status).toBe(200);
    });
  });

  describe('malformed JSON', () => {
    /** [what, raw body]: not JSON at all: 400 invalid_json, the message saying it is not valid JSON. */
    const unparseable: Array<[string, string | Buffer]> = [
      ['a truncated body', '{"messages": ['],
      ['trailing garbage', '{"messages": []} x'],
      ['single quotes', "{'messages': []}"],
      ['NaN', '{"max_tokens": NaN}'],
      ['a trailing comma', '{"max_tokens": 2,}'],
      ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
      ['a bare word', 'hello'],
    ];
    const routes = (): Array<[string, string]> => [
      ['chat/completions (fast lane)', `${chat.baseUrl}/chat/completions`],
      ['completions (fast lane)', `${chat.baseUrl}/completions`],
      ['embeddings', `${embedding.baseUrl}/embeddings`],
      ['images/generations', `${image.baseUrl}/images/generations?async=true`],
      ['videos/generations', `${image.baseUrl}/videos/generations`],
      ['shared/v1/chat/completions', `${test.url}/shared/v1/chat/completions`],
      ['graphql', `${test.url}/graphql`],
    ];

    it('is 400 invalid_json saying the body is not valid JSON, on every JSON route', async () => {
      const outcomes = [];
      const expected = [];
      for (const [route, url] of routes()) {
        for (const [what, body] of unparseable) {
          const answer = await call('POST', url, bearer(workspace.apiKey), body, { 'content-type': 'application/json' });
          outcomes.push({ route, what, error: openAIError(answer), says: /not valid JSON/.test(answer.json?.error?.message ?? '') });
          expected.push({ route, what, error: { status: 400, type: 'invalid_request_error', code: 'invalid_json', param: null }, says: true });
        }
      }
      expect(outcomes).toEqual(expected);
    });

    it('JSON nested deeper than the server will build, or not an object, is a 400 too, never a 5xx', async () => {
      const deep = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
      const bodies: Array<[string, string]> = [
        ['20,000 nested arrays', deep(20_000)],
        ['10,000 nested objects', `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`],
        ['deep nesting inside a valid field', `{"messages": [{"role": "user", "content": "hi", "extra": ${deep(20_000)}}], "max_tokens": 2}`],
        ['an array', '[1, 2]'],
        ['a string', '"messages"'],
        ['null', 'null'],
      ];
      const outcomes = [];
      const expected = [];
      for (const [route, url] of routes()) {
        for (const [what, body] of bodies) {
          const answer = await call('POST', url, bearer(workspace.apiKey), body, { 'content-type': 'application/json' });
          const error = openAIError(answer);
          outcomes.push({ route, what, status: error.status, openAIBody: !error.type.startsWith('<') });
          expected.push({ route, what, status: 400, openAIBody: true });
        }
      }
      // GraphQL answers a well-formed body that is not a request object in its own shape (Apollo's BAD_REQUEST); still a 400.
      expect(outcomes.map((outcome) => (outcome.route === 'graphql' ? { ...outcome, openAIBody: true } : outcome))).toEqual(expected);
    });
  });

  describe('prepaid credit', () => {
    const textCalls = (chatEndpoint: Endpoint, embeddingEndpoint: Endpoint): Array<[string, string, unknown]> => [
      ['chat/completions', `${chatEndpoint.baseUrl}/chat/completions`, chatBody],
      ['chat/completions streamed', `${chatEndpoint.baseUrl}/chat/completions`, { ...chatBody, stream: true }],
      ['completions', `${chatEndpoint.baseUrl}/completions`, { prompt: 'hi', max_tokens: 2 }],
      ['completions streamed', `${chatEndpoint.baseUrl}/completions`, { prompt: 'hi', max_tokens: 2, stream: true }],
      ['embeddings', `${embeddingEndpoint.baseUrl}/embeddings`, { input: ['hi', 'there'] }],
    ];
    const QUOTA = { status: 402, type: 'insufficient_quota', code: 'insufficient_quota', param: null };
    const createWorkspace = async (name: string, creditBalance: string) => {
      const created = await operator('mutation($name: String!, $credit: Decimal) { createWorkspace(name: $name, creditBalance: $credit) { workspace { id } apiKey { id } plaintext } }', { name, credit: creditBalance });
      expect(created.body.errors).toBeUndefined();
      const { workspace: { id }, apiKey, plaintext } = created.body.data.createWorkspace;
      // The operator lets it run replicas on this host (local capacity is granted, never a default).
      await operator('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 10) { budget } }', { id });
      return { workspaceId: id as string, apiKeyId: apiKey.id as string, apiKey: plaintext as string };
    };
    const statuses = async (calls: Array<[string, string, unknown]>, key: string) => {
      const outcomes: Array<{ what: string; answer: HttpAnswer }> = [];
      for (const [what, url, body] of calls) outcomes.push({ what, answer: await call('POST', url, bearer(key), body) });
      return outcomes;
    };

    it('a prepaid workspace with zero credit gets 402 insufficient_quota on chat, completions and embeddings, runs nothing, and is served once topped up', async () => {
      const broke = await createWorkspace('zero credit', '0');
      // External deployments: no replica, so a call past the credit gate would be 503, not 402.
      const brokeChat = await test.createDeployment(broke, { provider: 'external' });
      const brokeEmbedding = await test.createDeployment(broke, { modelId: EMBEDDING_MODEL, provider: 'external' });
      const calls = textCalls(brokeChat, brokeEmbedding);
      const refused = await statuses(calls, broke.apiKey);
      expect(refused.map(({ what, answer }) => ({ what, error: openAIError(answer) }))).toEqual(calls.map(([what]) => ({ what, error: QUOTA })));

      const asBroke = graphqlAs(test.url, broke.apiKey);
      const range = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() };
      await new Promise((resolve) => setTimeout(resolve, 100)); // usage records are flushed every 20 ms in tests
      expect((await asBroke('query($from: DateTimeISO!, $to: DateTimeISO!) { usage(from: $from, to: $to, groupBy: "deployment") { key requests } creditBalance }', range)).body.data)
        .toEqual({ usage: [], creditBalance: '0' });

      // A top-up lifts the gate at once: the calls now get as far as the (missing) replica.
      expect((await operator('mutation($id: ID!) { addCredit(workspaceId: $id, amount: "5") }', { id: broke.workspaceId })).body.data.addCredit).toBe('5');
      const served = await statuses(calls, broke.apiKey);
      expect(served.map(({ what, answer }) => ({ what, code: answer.json?.error?.code }))).toEqual(calls.map(([what]) => ({ what, code: 'no_replica_available' })));
    });

    it('a zero-credit workspace gets 402 on images and videos too, sync and async, and no record is created', async () => {
      const broke = await createWorkspace('zero credit media', '0');
      const image = await test.createDeployment(broke, { modelId: 'black-forest-labs/FLUX.1-schnell', provider: 'external' });
      const video = await test.createDeployment(broke, { modelId: 'Lightricks/LTX-Video', provider: 'external' });
      const calls: Array<[string, string, unknown]> = [
        ['images sync', `${image.baseUrl}/images/generations`, { model: 'black-forest-labs/FLUX.1-schnell', prompt: 'a lighthouse', size: '512x512' }],
        ['images async', `${image.baseUrl}/images/generations?async=true`, { model: 'black-forest-labs/FLUX.1-schnell', prompt: 'a lighthouse', size: '512x512' }],
        ['videos/generations', `${video.baseUrl}/videos/generations`, { model: 'Lightricks/LTX-Video', prompt: 'waves' }],
      ];
      const refused = await statuses(calls, broke.apiKey);
      expect(refused.map(({ what, answer }) => ({ what, error: openAIError(answer) }))).toEqual(calls.map(([what]) => ({ what, error: QUOTA })));
      const records = await test.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM request_records WHERE workspace_id = $1', [broke.workspaceId]);
      expect(records[0].count).toBe(0);
    });

    it('credit used up by GPU time turns the same calls into 402 within the key cache\'s lifetime', async () => {
      // 0.4 $ at 0.1 $/s: about 4 s of running replica.
      const spender = await createWorkspace('spender', '0.4');
      const spenderChat = await test.createDeployment(spender, { priceCapPerHour: LOCAL_PRICE_PER_HOUR });
      const spenderEmbedding = await test.createDeployment(spender, { modelId: EMBEDDING_MODEL, provider: 'external' });
      await test.waitForReplicas(spenderChat.id, 1);
      expect((await call('POST', `${spenderChat.baseUrl}/chat/completions`, bearer(spender.apiKey), chatBody)).status).toBe(200);

      const asSpender = graphqlAs(test.url, spender.apiKey);
      await waitFor(async () => Number((await asSpender('{ creditBalance }')).body.data.creditBalance) <= 0, 15_000, 'the credit to run out');
      // The key cache (API_KEY_CACHE_TTL_MS, 1 s here) may answer from before the balance crossed zero.
      await waitFor(async () => (await call('POST', `${spenderChat.baseUrl}/chat/completions`, bearer(spender.apiKey), chatBody)).status === 402, 10_000, '402 once the credit is gone');
      const calls = textCalls(spenderChat, spenderEmbedding);
      const refused = await statuses(calls, spender.apiKey);
      expect(refused.map(({ what, answer }) => ({ what, error: openAIError(answer) }))).toEqual(calls.map(([what]) => ({ what, error: QUOTA })));
      await test.server.controlPlane.deployments.delete(spender.workspaceId, spenderChat.id);
    });
  });

  describe('RPM under a parallel burst', () => {
    it('admits at most the key\'s limit of a burst fired at once across chat, streamed chat and completions; the rest are 429 with Retry-After', async () => {
      const { plaintext } = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'burst', { rpmLimit: 5 });
      const kinds: Array<[string, unknown]> = [
        ['/chat/completions', chatBody], ['/chat/completions', { ...chatBody, stream: true }], ['/completions', { prompt: 'hi', max_tokens: 2 }],
      ];
      const answers = await Promise.all(Array.from({ length: 24 }, (_, index) => {
        const [path, body] = kinds[index % kinds.length];
        return call('POST', `${chat.baseUrl}${path}`, bearer(plaintext), body);
      }));
      const admitted = answers.filter((answer) => answer.status === 200);
      const limited = answers.filter((answer) => answer.status === 429);
      expect({ admitted: admitted.length, limited: limited.length }).toEqual({ admitted: 5, limited: 19 });
      for (const answer of limited) {
        expect(openAIError(answer)).toEqual({ status: 429, type: 'rate_limit_error', code: 'rate_limit_error', param: null });
        expect(Number(answer.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      }
      // The window is full: one more, alone, is refused too.
      expect((await call('POST', `${chat.baseUrl}/chat/completions`, bearer(plaintext), chatBody)).status).toBe(429);
    });

    it('the limit is one window per key across routes: a burst split between the fast lane and embeddings admits at most the limit', async () => {
      const { plaintext } = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'burst across routes', { rpmLimit: 3 });
      const answers = await Promise.all(Array.from({ length: 16 }, (_, index) => (index % 2 === 0
        ? call('POST', `${chat.baseUrl}/chat/completions`, bearer(plaintext), chatBody)
        // No replica: an admitted embeddings call goes on to 503; a refused one is 429.
        : call('POST', `${embedding.baseUrl}/embeddings`, bearer(plaintext), { input: 'hi' }))));
      const admitted = answers.filter((answer) => answer.status !== 429);
      expect(admitted.length).toBe(3);
      expect(answers.every((answer) => [200, 429, 503].includes(answer.status))).toBe(true);
    });
  });
});
