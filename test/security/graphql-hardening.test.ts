import http from 'node:http';
import WebSocket from 'ws';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { GraphQLSocket } from './support/graphql-socket';

/**
 * One anonymous request must not be able to stall the server: a body is read only after the
 * caller is known from its header (without a key: a few KB, for sign-in), over-deep JSON is
 * refused while scanning, documents stop parsing at a token limit, and WebSocket frames are
 * bounded (small before connection_init). Each case here was answered only after the server
 * had built the whole hostile value.
 */
describe('GraphQL and body limits hold before any work is done', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: { slug: string };
  const GRAPHQL_MAX_BODY_BYTES = 64 * 1024;
  const ANONYMOUS_MAX_BODY_BYTES = 2048;
  const MAX_TOKENS = 2_000;

  const nested = (depth: number) => Buffer.from('['.repeat(depth) + ']'.repeat(depth));
  /** POSTs raw bytes (optionally chunked, without content-length) and reads the whole answer. */
  const post = (path: string, body: Buffer, authorization?: string, chunked = false) => new Promise<{ status: number; json: any }>((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (authorization) headers.authorization = authorization;
    if (!chunked) headers['content-length'] = String(body.length);
    const request = http.request(`${test.url}${path}`, { method: 'POST', headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    request.on('error', reject);
    request.end(body);
  });
  const graphql = (query: string, authorization?: string) => post('/graphql', Buffer.from(JSON.stringify({ query })), authorization);

  beforeAll(async () => {
    test = await startTestServer({
      gateway: {
        graphqlMaxBodyBytes: GRAPHQL_MAX_BODY_BYTES, graphqlAnonymousMaxBodyBytes: ANONYMOUS_MAX_BODY_BYTES, graphqlMaxTokens: MAX_TOKENS,
        // Past the sockets' own 10 s here: the 3 s default raced the 1009 of a 16 MB frame on a
        // loaded CI run (4408 came first: the server read the frame only after its init timer ran
        // out). The init timeout is test/security/connections.test.ts's.
        graphqlConnectionInitTimeoutMs: 60_000,
      },
    });
    workspace = await test.createWorkspace();
    deployment = await test.createDeployment(workspace);
  });

  afterAll(async () => {
    await test?.stop();
  });

  describe('HTTP', () => {
    it('without a key, a body over the sign-in size is refused with 401 before it is read, declared or chunked', async () => {
      for (const chunked of [false, true]) {
        const answer = await post('/graphql', nested(2_000_000), undefined, chunked);
        expect(answer.status).toBe(401);
        expect(answer.json.error).toMatchObject({ code: 'invalid_api_key', message: expect.stringContaining(`at most ${ANONYMOUS_MAX_BODY_BYTES} bytes`) });
      }
      const wrongKey = await post('/graphql', nested(10_000), 'Bearer mk-not-a-key');
      expect(wrongKey.status).toBe(401);
    });

    it('without a key only sign-in runs: introspection and every other operation are refused before they execute', async () => {
      const signIn = await graphql('mutation { redeemSignInLink(token: "nope") { apiKey } }');
      expect(signIn.json.errors[0].extensions).toMatchObject({ code: 'UNAUTHENTICATED', param: 'token' });
      for (const query of ['{ __schema { types { name } } }', '{ __type(name: "Query") { name } }', '{ catalog { id } }', '{ __typename catalog { id } }']) {
        const answer = await graphql(query);
        expect(answer.status).toBe(401);
        expect(answer.json.errors[0].extensions.code).toBe('UNAUTHENTICATED');
        expect(answer.json.data).toBeUndefined();
      }
      expect((await graphql('{ __typename }')).json).toEqual({ data: { __typename: 'Query' } });
      const introspected = await graphql('{ __schema { queryType { name } } }', `Bearer ${workspace.apiKey}`);
      expect(introspected.json.data.__schema.queryType.name).toBe('Query');
    });

    it('with a key: a body over the GraphQL limit is 413, over-deep JSON is 400 before parsing, a document over the token limit is a parse error', async () => {
      const authorization = `Bearer ${workspace.apiKey}`;
      expect((await post('/graphql', nested(1_000_000), authorization)).status).toBe(413);
      const deep = await post('/graphql', Buffer.from(`{"query":"{ __typename }","variables":{"a":${'['.repeat(20_000)}${']'.repeat(20_000)}}}`), authorization);
      expect(deep.status).toBe(400);
      expect(deep.json.error.message).toMatch(/nests arrays and objects more than 128 levels/);
      const tokens = await graphql(`{ ${'__typename '.repeat(MAX_TOKENS * 2)}}`, authorization);
      expect(tokens.status).toBe(400);
      expect(tokens.json.errors[0]).toMatchObject({ extensions: { code: 'GRAPHQL_PARSE_FAILED' }, message: expect.stringContaining(`more that ${MAX_TOKENS} tokens`) });
    });

    it('/v1 refuses over-deep JSON with 400 naming the limit (scanned before JSON.parse builds it)', async () => {
      const body = Buffer.from(`{"messages":[{"role":"user","content":"hi"}],"stop":${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
      const answer = await post(`/d/${deployment.slug}/v1/chat/completions`, body, `Bearer ${workspace.apiKey}`);
      expect(answer.status).toBe(400);
      expect(answer.json.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/more than 128 levels deep/) });
    });
  });

  describe('WebSocket', () => {
    /** Sends `frames` on a fresh socket (optionally after a connection_init) and resolves with the close code. */
    const closeCodeAfter = (frames: Array<string | Buffer>, init?: string) => new Promise<number>((resolve, reject) => {
      const socket = new WebSocket(`${test.url.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
      socket.on('error', () => {});
      socket.on('close', (code) => resolve(code));
      socket.on('open', () => {
        if (!init) {
          for (const frame of frames) socket.send(frame);
          return;
        }
        socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: init } }));
      });
      socket.on('message', (data) => {
        if ((JSON.parse(data.toString()) as { type: string }).type === 'connection_ack') for (const frame of frames) socket.send(frame);
      });
      setTimeout(() => reject(new Error('the socket was not closed')), 10_000).unref();
    });

    it('before connection_init, a frame over the sign-in size is refused with 1009; any frame over the limit likewise', async () => {
      expect(await closeCodeAfter([JSON.stringify({ type: 'connection_init', payload: { pad: 'x'.repeat(ANONYMOUS_MAX_BODY_BYTES) } })])).toBe(1009);
      expect(await closeCodeAfter([nested(8 * 1024 * 1024)])).toBe(1009);
      expect(await closeCodeAfter([Buffer.alloc(GRAPHQL_MAX_BODY_BYTES + 1, 0x20).toString()], `Bearer ${workspace.apiKey}`)).toBe(1009);
    });

    it('after connection_init, over-deep JSON is refused with 4400 and a document over the token limit is a parse error', async () => {
      expect(await closeCodeAfter([nested(20_000).toString()], `Bearer ${workspace.apiKey}`)).toBe(4400);
      const socket = await GraphQLSocket.open(test.url, `Bearer ${workspace.apiKey}`);
      try {
        const answer = await socket.run(`{ ${'__typename '.repeat(MAX_TOKENS * 2)}}`) as Array<{ message: string; extensions: { code: string } }>;
        expect(answer[0]).toMatchObject({ extensions: { code: 'GRAPHQL_PARSE_FAILED' }, message: expect.stringContaining(`more that ${MAX_TOKENS} tokens`) });
        expect(await socket.run('{ __typename }')).toEqual({ data: { __typename: 'Query' } });
      } finally {
        socket.terminate();
      }
    });
  });
});
