import http from 'node:http';
import { graphqlClient } from '../capacity/support/graphql-client';
import { overWebSocket, type WebSocketOutcome } from '../support/graphql-websocket';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';

interface ErrorBody { error: { message: string; type: string; param: string | null; code: string } }

/** Issue 19, part 4: the smaller holes, each through the server a client talks to. */
describe('smaller holes (issue 19, part 4)', () => {
  let test: TestServer;
  let mine: TestWorkspace;
  let theirs: TestWorkspace;
  let myChat: { id: string; baseUrl: string };
  let theirChat: { id: string; baseUrl: string };
  let myEmbeddings: { id: string; baseUrl: string };

  beforeAll(async () => {
    // No agents: every refusal here happens before a job would be dispatched.
    test = await startTestServer({ controlPlane: { localAgents: false } });
    mine = await test.createWorkspace();
    theirs = await test.createWorkspace();
    myChat = await test.createDeployment(mine);
    theirChat = await test.createDeployment(theirs);
    myEmbeddings = await test.createDeployment(mine, { modelId: 'BAAI/bge-large-en-v1.5' });
  });

  afterAll(async () => {
    await test?.stop();
  });

  const post = async (url: string, body: unknown, key = mine.apiKey) => {
    const response = await fetch(url, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
    });
    const text = await response.text();
    return { status: response.status, bytes: Buffer.byteLength(text), body: JSON.parse(text) as ErrorBody };
  };

  describe('IPv4 carried in IPv6: NAT64 is judged as that IPv4, the ::/8 spellings are refused', () => {
    const graphql = () => graphqlClient(test.url, mine.apiKey);

    it.each([
      ['IPv4-translated loopback', 'https://[::ffff:0:7f00:1]/h'],
      ['IPv4-translated metadata', 'https://[::ffff:0:169.254.169.254]/h'],
      ['IPv4-compatible loopback', 'https://[::127.0.0.1]/h'],
      ['NAT64 carrying a private address', 'https://[64:ff9b::10.0.0.5]/h'],
      ['Teredo', 'https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/h'],
    ])('a webhook endpoint at %s is refused', async (_name, url) => {
      const result = await graphql()('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url });
      expect(result.data).toBeNull();
      expect(result.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', param: 'url' }, message: expect.stringContaining('private') });
    });

    it('a storage endpoint at an IPv4-translated private address is refused', async () => {
      const result = await graphql()(`mutation($endpoint: String!) { createStorageCredential(input: {
        name: "outputs", endpoint: $endpoint, region: "us-east-1", bucket: "outputs", accessKeyId: "AKIAEXAMPLE", secretAccessKey: "secret" }) { id } }`,
      { endpoint: 'https://[::ffff:0:a00:5]:9000' });
      expect(result.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', param: 'endpoint' }, message: expect.stringContaining('private') });
    });

    it('a public IPv4 behind NAT64 is accepted, as the IPv4 itself is (an IPv6-only host\'s DNS64 answers so)', async () => {
      const result = await graphql()('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { url } }', { url: 'https://[64:ff9b::5db8:d70e]/h' });
      expect(result).toEqual({ data: { createWebhookEndpoint: { url: 'https://[64:ff9b::5db8:d70e]/h' } } });
    });

    it('a public IPv4 spelled in ::/8 (translated, mapped, compatible) is refused: IPv6 is an allow-list', async () => {
      for (const url of ['https://[::ffff:0:5db8:d70e]/h', 'https://[::ffff:5db8:d70e]/h', 'https://[::5db8:d70e]/h']) {
        const result = await graphql()('mutation($url: String!) { createWebhookEndpoint(input: {url: $url}) { id } }', { url });
        expect(result.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', param: 'url' }, message: expect.stringContaining('private') });
      }
    });
  });

  describe('/metrics without a token: no header makes a proxied client look local', () => {
    it('serves a direct local scrape', async () => {
      expect((await fetch(`${test.url}/metrics`)).status).toBe(200);
    });

    it.each([
      ['x-real-ip', '203.0.113.9'],
      ['x-real-ip', '127.0.0.1'],
      ['true-client-ip', '203.0.113.9'],
      ['cf-connecting-ip', '203.0.113.9'],
      ['x-client-ip', '203.0.113.9'],
      ['fastly-client-ip', '203.0.113.9'],
      ['x-cluster-client-ip', '203.0.113.9'],
      ['x-forwarded-host', 'metrics.example.com'],
      ['via', '1.1 nginx'],
      ['x-forwarded-for', '127.0.0.1'],
    ])('refuses a loopback connection carrying %s: %s (a proxy on this host forwarding someone)', async (header, value) => {
      const response = await fetch(`${test.url}/metrics`, { headers: { [header]: value } });
      expect(response.status).toBe(403);
      const body = (await response.json()) as ErrorBody;
      expect(body.error).toMatchObject({ type: 'permission_error', code: 'permission_denied' });
      expect(body.error.message).toContain(header);
    });
  });

  describe('replicaLoad(deploymentId:) of another workspace', () => {
    const REPLICA_LOAD = 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { replicaId } }';
    const summary = (outcome: WebSocketOutcome) => ({
      closed: outcome.closed,
      messages: outcome.messages.map(({ type, payload }) => ({
        type, data: (payload as { data?: unknown }).data ?? null,
        errors: ((payload as { errors?: Array<{ extensions: unknown }> }).errors ?? []).map((error) => error.extensions),
      })),
    });

    it('is FORBIDDEN over graphql-ws when subscribing, with the code deployment(id:) answers', async () => {
      const query = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: 'query($id: ID!) { deployment(id: $id) { id } }', variables: { id: theirChat.id } });
      const subscription = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: REPLICA_LOAD, variables: { id: theirChat.id } }, { untilMs: 3_000 });
      expect(summary(query)).toEqual({ closed: null, messages: [{ type: 'next', data: null, errors: [{ code: 'FORBIDDEN', param: 'id' }] }] });
      expect(summary(subscription)).toEqual({ closed: null, messages: [{ type: 'next', data: null, errors: [{ code: 'FORBIDDEN', param: 'deploymentId' }] }] });
      expect((subscription.messages[0].payload as { errors: Array<{ message: string }> }).errors[0].message).toContain('belongs to another workspace');
    });

    it('is NOT_FOUND for a deployment that does not exist, and runs for one of the caller\'s own', async () => {
      const unknown = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: REPLICA_LOAD, variables: { id: 'dep_nope' } }, { untilMs: 3_000 });
      expect(summary(unknown).messages).toEqual([{ type: 'next', data: null, errors: [{ code: 'NOT_FOUND', param: 'deploymentId' }] }]);
      // Accepted: still open, nothing sent (no agent reports load here) when the helper stops listening.
      const own = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: REPLICA_LOAD, variables: { id: myChat.id } }, { untilMs: 500 });
      expect(summary(own)).toEqual({ closed: null, messages: [] });
    });

    it('is not run over HTTP at all (subscriptions live on graphql-ws), while deployment(id:) is FORBIDDEN there too', async () => {
      const graphql = graphqlClient(test.url, mine.apiKey);
      const overHttp = await fetch(`${test.url}/graphql`, {
        method: 'POST', headers: { authorization: `Bearer ${mine.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ query: REPLICA_LOAD, variables: { id: theirChat.id } }),
      });
      const body = (await overHttp.json()) as { data?: unknown; errors: Array<{ extensions: { code: string } }> };
      expect([overHttp.status, body.data, body.errors.map((error) => error.extensions.code)]).toEqual([400, undefined, ['BAD_REQUEST']]);
      const query = await graphql('query($id: ID!) { deployment(id: $id) { id } }', { id: theirChat.id });
      expect(query.errors?.[0].extensions).toEqual({ code: 'FORBIDDEN', param: 'id' });
    });
  });

  describe('error messages quote at most the beginning of a bad value', () => {
    const messages = [{ role: 'user', content: 'hi' }];

    it('a 10,000-item stop array: a small body naming stop and what it may be', async () => {
      const stop = Array.from({ length: 10_000 }, (_, index) => `stop-${index}`);
      const result = await post(`${myChat.baseUrl}/chat/completions`, { messages, stop });
      expect(result.status).toBe(400);
      expect(result.bytes).toBeLessThan(2_048);
      expect(result.body.error).toMatchObject({ param: 'stop', code: 'invalid_request' });
      expect(result.body.error.message).toMatch(/^stop must be a string or an array of up to 4 strings, got \["stop-0","stop-1",.*… \(10000 items\)$/);
    });

    it('a 100 KB model string: a small body naming model and the model served', async () => {
      const result = await post(`${myChat.baseUrl}/chat/completions`, { model: 'm'.repeat(100_000), messages });
      expect(result.status).toBe(400);
      expect(result.bytes).toBeLessThan(2_048);
      expect(result.body.error).toMatchObject({ param: 'model', code: 'model_mismatch' });
      expect(result.body.error.message).toContain(`this endpoint serves '${test.server.controlPlane.catalog.defaultChatModel().id}'`);
    });

    it('a huge bad enum value (encoding_format): a small body naming the field and the values allowed', async () => {
      const result = await post(`${myEmbeddings.baseUrl}/embeddings`, { input: 'hello', encoding_format: 'f'.repeat(100_000) });
      expect(result.status).toBe(400);
      expect(result.bytes).toBeLessThan(2_048);
      expect(result.body.error).toMatchObject({ param: 'encoding_format' });
      expect(result.body.error.message).toContain('encoding_format must be "float" or "base64", got "fff');
    });

    it('a huge bad GraphQL enum variable and argument: BAD_USER_INPUT with a small message naming the type', async () => {
      const huge = 'X'.repeat(100_000);
      const response = await fetch(`${test.url}/graphql`, {
        method: 'POST', headers: { authorization: `Bearer ${mine.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          query: 'query($g: EarningsGrouping!) { sharingEarnings(groupBy: $g, from: "2025-01-01T00:00:00Z", to: "2025-01-02T00:00:00Z") { key } }',
          variables: { g: huge },
        }),
      });
      const text = await response.text();
      const body = JSON.parse(text) as { errors: Array<{ message: string; extensions: { code: string } }> };
      expect(Buffer.byteLength(text)).toBeLessThan(2_048);
      expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      expect(body.errors[0].message).toContain('$g');
      expect(body.errors[0].message).toContain('EarningsGrouping');

      const overSocket = await overWebSocket(test.url, `Bearer ${mine.apiKey}`, { query: 'query($id: ID!) { deployment(id: $id) { id } }', variables: { id: [huge] } });
      const socketText = JSON.stringify(overSocket.messages);
      expect(Buffer.byteLength(socketText)).toBeLessThan(2_048);
      expect(socketText).toContain('BAD_USER_INPUT');
    });
  });

  describe('the console\'s Content-Security-Policy', () => {
    const policyFor = (host: string) => new Promise<string>((resolve, reject) => {
      const { port } = new URL(test.url);
      const request = http.get({ host: '127.0.0.1', port, path: '/console/', headers: { host } }, (response) => {
        response.resume();
        resolve(String(response.headers['content-security-policy']));
      });
      request.on('error', reject);
    });
    const connectSources = (policy: string) => policy.split('; ').find((directive) => directive.startsWith('connect-src '))!.split(' ').slice(1);

    it('lets the page connect to its own origin only: no ws:/wss: scheme wildcards', async () => {
      const { host } = new URL(test.url);
      const page = await fetch(`${test.url}/console/`);
      const sources = connectSources(String(page.headers.get('content-security-policy')));
      expect(sources).toEqual(["'self'", `ws://${host}`, `wss://${host}`]);
    });

    it('puts nothing but a plain host[:port] from the Host header into the policy', async () => {
      expect(connectSources(await policyFor('console.example.com:8443'))).toEqual(["'self'", 'ws://console.example.com:8443', 'wss://console.example.com:8443']);
      for (const forged of ['*', 'evil.example.com; script-src *', '*.example.com', 'example.com/path', 'a b']) {
        const policy = await policyFor(forged);
        expect(connectSources(policy)).toEqual(["'self'"]);
        expect(policy).toContain("script-src 'self';");
      }
    });
  });
});
