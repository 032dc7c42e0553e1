import { overWebSocket, type WebSocketOutcome } from '../support/graphql-websocket';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { OPERATOR_TOKEN } from '../capacity/support/graphql-client';

/** Where a body gives away the server's insides: a stacktrace key, a path of this checkout or of node_modules, a stack frame. */
function leaks(body: unknown): string[] {
  const found: string[] = [];
  const root = process.cwd();
  const stack: Array<[unknown, string]> = [[body, '$']];
  while (stack.length > 0) {
    const [value, path] = stack.pop()!;
    if (typeof value === 'string') {
      if (value.includes(root) || value.includes('node_modules') || /\.[cm]?[jt]sx?:\d+/.test(value) || /^\s*at /m.test(value)) found.push(`${path}: ${value}`);
    } else if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push([item, `${path}[${index}]`]));
    } else if (value && typeof value === 'object') {
      for (const [key, item] of Object.entries(value)) {
        if (key === 'stacktrace' || key === 'exception') found.push(`${path}.${key}`);
        stack.push([item, `${path}.${key}`]);
      }
    }
  }
  return found;
}

/** The `extensions.code` of every GraphQL error in a body (a result's `errors`, or an error message's array). */
function codes(body: unknown): string[] {
  const errors = Array.isArray(body) ? body : (body as { errors?: unknown[] } | null)?.errors ?? [];
  return errors.map((error) => (error as { extensions?: { code?: string } }).extensions?.code ?? '(none)');
}

interface Case {
  label: string;
  query: string;
  variables?: Record<string, unknown>;
  /** The bearer token; the workspace key when absent. */
  as?: 'operator' | 'nobody';
  code: string;
}

const CASES: Case[] = [
  { label: 'parse error', query: '{ deployment(id: "x") { id }', code: 'GRAPHQL_PARSE_FAILED' },
  { label: 'unknown field', query: '{ deployment(id: "x") { nope } }', code: 'GRAPHQL_VALIDATION_FAILED' },
  { label: 'unknown input field', query: 'mutation { createApiKey(input: {name: "x", bogus: 1}) { plaintext } }', code: 'GRAPHQL_VALIDATION_FAILED' },
  { label: 'argument of the wrong type', query: '{ requests(deploymentId: "x", limit: "ten") { id } }', code: 'GRAPHQL_VALIDATION_FAILED' },
  { label: 'variable of the wrong type', query: 'query($limit: Int!) { requests(deploymentId: "x", limit: $limit) { id } }', variables: { limit: 'ten' }, code: 'BAD_USER_INPUT' },
  { label: 'missing variable', query: 'query($id: ID!) { deployment(id: $id) { id } }', variables: {}, code: 'BAD_USER_INPUT' },
  {
    label: 'AppError BAD_USER_INPUT', query: '{ costs(from: "2025-01-01T00:00:00Z", to: "2025-01-02T00:00:00Z", groupBy: "week") { key } }', code: 'BAD_USER_INPUT',
  },
  { label: 'unknown id', query: '{ deployment(id: "dep_0") { id } }', code: 'NOT_FOUND' },
  { label: 'operator-only mutation with a workspace key', query: 'mutation { removeStaticHost(id: "host_0") { id } }', code: 'FORBIDDEN' },
  { label: 'operator-only mutation without a key', query: 'mutation { removeStaticHost(id: "host_0") { id } }', as: 'nobody', code: 'UNAUTHENTICATED' },
  { label: 'workspace query with the operator token', query: '{ deployments { id } }', as: 'operator', code: 'UNAUTHENTICATED' },
];

/**
 * GraphQL errors never carry a stack trace or a server path, whatever NODE_ENV says (Apollo
 * adds `extensions.stacktrace` unless NODE_ENV is production or test), over HTTP and over
 * graphql-ws alike, and both transports answer the same codes.
 */
describe.each([['unset', undefined], ['development', 'development']])('GraphQL errors with NODE_ENV %s', (_label, nodeEnv) => {
  let test: TestServer;
  let workspace: TestWorkspace;
  const savedNodeEnv = process.env.NODE_ENV;

  const tokenOf = (as: Case['as']) => (as === 'operator' ? OPERATOR_TOKEN : as === 'nobody' ? null : workspace.apiKey);

  const overHttp = async (query: unknown, as?: Case['as'], init: RequestInit = {}) => {
    const token = tokenOf(as);
    const response = await fetch(`${test.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof query === 'string' ? query : JSON.stringify(query),
      ...init,
    });
    const text = await response.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON: scanned as the string it is.
    }
    return { status: response.status, body };
  };

  beforeAll(async () => {
    // Apollo reads NODE_ENV when the server is built; jest sets it to 'test', which hides the leak.
    if (nodeEnv === undefined) delete process.env.NODE_ENV;
    else process.env.NODE_ENV = nodeEnv;
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN } });
    workspace = await test.createWorkspace();
  });

  afterAll(async () => {
    process.env.NODE_ENV = savedNodeEnv;
    await test?.stop();
  });

  it('over HTTP: each bad operation has its code and no stack trace or path', async () => {
    const outcomes = [];
    for (const { label, query, variables, as } of CASES) {
      const { status, body } = await overHttp({ query, variables }, as);
      outcomes.push({ label, status: status < 500, codes: codes(body), leaks: leaks(body) });
    }
    expect(outcomes).toEqual(CASES.map(({ label, code }) => ({ label, status: true, codes: [code], leaks: [] })));
  });

  it('over HTTP: malformed requests (no query, a GET mutation, a JSON array, a batch) carry no stack trace or path', async () => {
    const bodies = [
      await overHttp({}),
      await overHttp({ query: 42 }),
      await overHttp([{ query: '{ deployments { id } }' }]),
      await overHttp({ query: '{ deployments { id } }', variables: 'not an object' }),
      await overHttp(undefined, undefined, { method: 'GET', body: undefined }),
    ];
    const get = await fetch(`${test.url}/graphql?query=${encodeURIComponent('mutation { createApiKey(input: {name: "x"}) { plaintext } }')}`, {
      headers: { authorization: `Bearer ${workspace.apiKey}`, 'apollo-require-preflight': 'true' },
    });
    bodies.push({ status: get.status, body: await get.json() });
    expect(bodies.map(({ status, body }) => ({ status: status < 500, leaks: leaks(body) }))).toEqual(bodies.map(() => ({ status: true, leaks: [] })));
  });

  it('over graphql-ws: the same codes as over HTTP, and no stack trace or path', async () => {
    const overSocket = CASES.filter(({ as }) => as !== 'nobody');
    const outcomes = [];
    for (const { label, query, variables, as } of overSocket) {
      const outcome = await overWebSocket(test.url, `Bearer ${tokenOf(as)}`, { query, variables });
      outcomes.push({ label, closed: outcome.closed, codes: outcome.messages.flatMap((message) => codes(message.payload)), leaks: leaks(outcome) });
    }
    expect(outcomes).toEqual(overSocket.map(({ label, code }) => ({ label, closed: null, codes: [code], leaks: [] })));
  });

  it('over graphql-ws: bad subscription arguments, and a subscription whose filter throws, carry codes and no stack trace or path', async () => {
    const missingArgument = await overWebSocket(test.url, `Bearer ${workspace.apiKey}`, { query: 'subscription { replicaLoad { replicaId } }' });
    const missingVariable = await overWebSocket(test.url, `Bearer ${workspace.apiKey}`, { query: 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { replicaId } }', variables: {} });
    // The operator token has no workspace: the subscription's filter refuses it when an event arrives.
    const filtered = await overWebSocket(test.url, `Bearer ${OPERATOR_TOKEN}`, { query: 'subscription { deploymentUpdated { id } }' }, {
      untilMs: 5_000,
      onSubscribed: async () => {
        await new Promise((resolve) => setTimeout(resolve, 100));
        await test.createDeployment(workspace, { provider: 'external' });
      },
    });
    const summary = (outcome: WebSocketOutcome) => ({ closed: outcome.closed, codes: outcome.messages.flatMap((message) => codes(message.payload)), leaks: leaks(outcome) });
    expect([summary(missingArgument), summary(missingVariable), summary(filtered)]).toEqual([
      { closed: null, codes: ['GRAPHQL_VALIDATION_FAILED'], leaks: [] },
      { closed: null, codes: ['BAD_USER_INPUT'], leaks: [] },
      { closed: null, codes: ['UNAUTHENTICATED'], leaks: [] },
    ]);
  });
});
