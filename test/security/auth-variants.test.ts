import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, graphql, graphqlAs, leaked, openAIError, OPERATOR_TOKEN, sleep, subscribe, type HttpAnswer, type LiveSubscription } from './support/security-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/** What one Authorization value gets on each surface that needs a workspace key. */
interface Outcome {
  chat: Refusal;
  models: Refusal;
  shared: Refusal;
  graphql: { code: string | undefined; data: unknown };
  websocket: { refused: boolean; events: number };
}

type Refusal = ReturnType<typeof openAIError> | { status: number };
/** The error of a refused call; only the status of a successful one. */
const refusal = (answer: HttpAnswer): Refusal => (answer.status < 300 ? { status: answer.status } : openAIError(answer));

const UNAUTHORIZED = { status: 401, type: 'authentication_error', code: 'invalid_api_key', param: null };
const REFUSED: Outcome = {
  chat: UNAUTHORIZED, models: UNAUTHORIZED, shared: UNAUTHORIZED,
  graphql: { code: 'UNAUTHENTICATED', data: null },
  websocket: { refused: true, events: 0 },
};

/**
 * Every way to present a credential that is not a workspace's current key (none, malformed,
 * mistyped, revoked, replaced, of a deleted workspace, the operator's, too long) is refused on
 * every surface that needs one: REST (the chat fast lane, a Koa route, the shared endpoint)
 * with 401 and OpenAI's error body, GraphQL with UNAUTHENTICATED and no data, graphql-ws at
 * connection. Never a 5xx, never a workspace's data. Operator operations refuse workspace keys.
 */
describe('authentication variants', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let other: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let otherDeployment: { id: string; slug: string; baseUrl: string };
  const keys = {} as { revoked: string; regeneratedOld: string; regeneratedNew: string; deletedWorkspace: string; deletedWorkspaceId: string };
  let live: LiveSubscription[] = [];

  const chatBody = { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 };

  /** `ownVisible`: the caller holds the workspace's key, so the workspace's own ids may appear (models' `owned_by`). */
  const probe = async (authorization: string | null, ownVisible = false): Promise<Outcome> => {
    const chat = await call('POST', `${deployment.baseUrl}/chat/completions`, authorization, chatBody);
    const models = await call('GET', `${deployment.baseUrl}/models`, authorization);
    const shared = await call('GET', `${test.url}/shared/v1/models`, authorization);
    const answer = await graphql(test.url, authorization, '{ deployments { id } apiKeys { id } }');
    const socket = subscribe(test.url, authorization as string, 'subscription { deploymentUpdated { id } }');
    live.push(socket);
    await socket.ready;
    for (const text of [chat.text, models.text, shared.text, answer.text]) {
      const own = ownVisible ? [] : [workspace.workspaceId, deployment.id, workspace.apiKeyId];
      expect(leaked(text, [...own, other.workspaceId, otherDeployment.id, other.apiKeyId])).toEqual([]);
    }
    return {
      chat: refusal(chat), models: refusal(models), shared: refusal(shared),
      graphql: { code: answer.body.errors?.[0]?.extensions.code, data: answer.body.data ?? null },
      websocket: { refused: socket.closed !== null || socket.errors.length > 0, events: socket.events.length },
    };
  };

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN } });
    workspace = await test.createWorkspace();
    other = await test.createWorkspace();
    deployment = await test.createDeployment(workspace);
    otherDeployment = await test.createDeployment(other, { provider: 'external' });
    const asWorkspace = graphqlAs(test.url, workspace.apiKey);
    const operator = graphqlAs(test.url, OPERATOR_TOKEN);
    await test.waitForReplicas(deployment.id, 1);

    // Each key is used first, so the server's key cache holds it as valid when it stops being valid.
    const use = async (key: string) => expect((await call('POST', `${deployment.baseUrl}/chat/completions`, `Bearer ${key}`, chatBody)).status).toBe(200);
    const revoked = (await asWorkspace('mutation { createApiKey(input: {name: "to revoke"}) { plaintext apiKey { id } } }')).body.data.createApiKey;
    await use(revoked.plaintext);
    expect((await asWorkspace('mutation($id: ID!) { revokeApiKey(id: $id) { id } }', { id: revoked.apiKey.id })).body.errors).toBeUndefined();
    keys.revoked = revoked.plaintext;

    const replaced = (await asWorkspace('mutation { createApiKey(input: {name: "to regenerate"}) { plaintext apiKey { id } } }')).body.data.createApiKey;
    await use(replaced.plaintext);
    keys.regeneratedOld = replaced.plaintext;
    keys.regeneratedNew = (await asWorkspace('mutation($id: ID!) { regenerateApiKey(id: $id) { plaintext } }', { id: replaced.apiKey.id })).body.data.regenerateApiKey.plaintext;

    const doomed = (await operator('mutation { createWorkspace(name: "doomed") { workspace { id } plaintext } }')).body.data.createWorkspace;
    const doomedDeployment = await test.createDeployment({ workspaceId: doomed.workspace.id, apiKey: doomed.plaintext, apiKeyId: '' }, { provider: 'external' });
    expect((await call('GET', `${doomedDeployment.baseUrl}/models`, `Bearer ${doomed.plaintext}`)).status).toBe(200);
    expect((await operator('mutation($id: ID!) { deleteWorkspace(id: $id) { deletedAt } }', { id: doomed.workspace.id })).body.errors).toBeUndefined();
    keys.deletedWorkspace = doomed.plaintext;
    keys.deletedWorkspaceId = doomed.workspace.id;
  });

  afterEach(() => {
    for (const socket of live) socket.stop();
    live = [];
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('the workspace key itself is accepted everywhere, and sees only its own workspace (the control)', async () => {
    const outcome = await probe(`Bearer ${workspace.apiKey}`, true);
    expect(outcome).toEqual({
      chat: { status: 200 }, models: { status: 200 }, shared: { status: 200 },
      graphql: { code: undefined, data: { deployments: [{ id: deployment.id }], apiKeys: expect.arrayContaining([{ id: workspace.apiKeyId }]) } },
      websocket: { refused: false, events: 0 },
    });
  });

  /** [what, Authorization header value or null]: each refused on every surface. */
  const refused = (): Array<[string, string | null]> => {
    const key = workspace.apiKey;
    const swapped = [...key.slice(3)].map((character) => (character === character.toLowerCase() ? character.toUpperCase() : character.toLowerCase())).join('');
    return [
      ['no Authorization header', null],
      ['an empty header', ''],
      ['"Bearer" and no token', 'Bearer'],
      ['"Bearer " and no token', 'Bearer '],
      ['only the key prefix', 'Bearer mk-'],
      ['the key without a scheme', key],
      ['the key with no space after Bearer', `Bearer${key}`],
      ['"Bearer:" with a colon', `Bearer: ${key}`],
      ['the key under the Basic scheme', `Basic ${Buffer.from(`${key}:`).toString('base64')}`],
      ['the key under a Token scheme', `Token ${key}`],
      ['the key quoted', `Bearer "${key}"`],
      ['the key twice', `Bearer ${key} ${key}`],
      ['the key split by a space', `Bearer ${key.slice(0, 20)} ${key.slice(20)}`],
      ['the key and one more character', `Bearer ${key}A`],
      ['the key without its last character', `Bearer ${key.slice(0, -1)}`],
      ['the key with its letters in the other case', `Bearer mk-${swapped}`],
      ['the key with its prefix in upper case', `Bearer MK-${key.slice(3)}`],
      ['an OpenAI-style key', `Bearer sk-${key.slice(3)}`],
      ['an over-long token (4 KiB)', `Bearer mk-${'A'.repeat(4096)}`],
      ['the key repeated to 2 KiB', `Bearer ${key.repeat(44)}`],
      ['a revoked key', `Bearer ${keys.revoked}`],
      ['a regenerated key\'s old plaintext', `Bearer ${keys.regeneratedOld}`],
      ['the key of a deleted workspace', `Bearer ${keys.deletedWorkspace}`],
      ['the operator token', `Bearer ${OPERATOR_TOKEN}`],
    ];
  };

  it('refuses every other credential with 401 (REST), UNAUTHENTICATED (GraphQL) or at connection (graphql-ws)', async () => {
    const outcomes: Array<[string, Outcome]> = [];
    for (const [what, authorization] of refused()) outcomes.push([what, await probe(authorization)]);
    expect(outcomes).toEqual(refused().map(([what, authorization]) => [what, authorization === `Bearer ${OPERATOR_TOKEN}`
      // The operator token may open a graphql-ws connection (it is no workspace key); what it sees there is the next test's.
      ? { ...REFUSED, websocket: { refused: expect.any(Boolean), events: 0 } }
      : REFUSED]));
  });

  it('a regenerated key\'s new plaintext works where the old one is refused', async () => {
    expect((await call('POST', `${deployment.baseUrl}/chat/completions`, `Bearer ${keys.regeneratedNew}`, chatBody)).status).toBe(200);
  });

  it('spellings of the valid key that HTTP treats as the same credential act as that key or are refused, never as anyone else', async () => {
    const key = workspace.apiKey;
    const valid = await probe(`Bearer ${key}`, true);
    // RFC 7235: the scheme is case-insensitive and the header value's surrounding whitespace is not part of it.
    const variants: Array<[string, string]> = [
      ['scheme in lower case', `bearer ${key}`],
      ['scheme in upper case', `BEARER ${key}`],
      ['two spaces after the scheme', `Bearer  ${key}`],
      ['a trailing space (raw in graphql-ws connectionParams)', `Bearer ${key} `],
      ['a tab after the scheme', `Bearer\t${key}`],
    ];
    for (const [what, authorization] of variants) {
      const outcome = await probe(authorization, true);
      expect({ what, acceptable: [valid, REFUSED].some((allowed) => JSON.stringify(allowed) === JSON.stringify(outcome)) }).toEqual({ what, acceptable: true });
    }
  });

  it('an operator graphql-ws session gets no workspace\'s events, while the workspace\'s own subscriber does', async () => {
    const operatorSession = subscribe(test.url, `Bearer ${OPERATOR_TOKEN}`, 'subscription { deploymentUpdated { id status } }');
    const requests = subscribe(test.url, `Bearer ${OPERATOR_TOKEN}`, 'subscription { requestUpdated { id status } }');
    const owner = subscribe(test.url, `Bearer ${workspace.apiKey}`, 'subscription { deploymentUpdated { id status } }');
    live.push(operatorSession, requests, owner);
    await Promise.all(live.map((socket) => socket.ready));
    expect((await graphqlAs(test.url, workspace.apiKey)('mutation($id: ID!) { updateDeployment(id: $id, input: {priceCapPerHour: 2.5}) { id } }', { id: deployment.id })).body.errors).toBeUndefined();
    await waitFor(() => owner.events.length > 0, 10_000, 'the owner\'s event');
    await sleep(300);
    expect({ deploymentUpdated: operatorSession.events, requestUpdated: requests.events }).toEqual({ deploymentUpdated: [], requestUpdated: [] });
    expect(leaked(JSON.stringify([operatorSession.errors, requests.errors]), [deployment.id, workspace.workspaceId])).toEqual([]);
    // The server is unharmed.
    expect((await call('GET', `${test.url}/healthz`, null)).status).toBe(200);
  });

  /** Every operator operation of schema.graphql, with arguments that would succeed for the operator. */
  const operatorOperations = (): Array<[string, string, Record<string, unknown>]> => [
    ['workspaces', '{ workspaces(includeDeleted: true) { id name creditBalance } }', {}],
    ['staticHosts', '{ staticHosts { id name } }', {}],
    ['createWorkspace', 'mutation { createWorkspace(name: "intruder", creditBalance: "1000") { plaintext workspace { id } } }', {}],
    ['deleteWorkspace (its own)', 'mutation($id: ID!) { deleteWorkspace(id: $id) { id deletedAt } }', { id: workspace.workspaceId }],
    ['deleteWorkspace (another)', 'mutation($id: ID!) { deleteWorkspace(id: $id) { id deletedAt } }', { id: other.workspaceId }],
    ['addCredit (to itself)', 'mutation($id: ID!) { addCredit(workspaceId: $id, amount: "1000") }', { id: workspace.workspaceId }],
    ['registerStaticHost', 'mutation { registerStaticHost(input: {name: "h", gpuName: "H100", gpuMemoryGb: 80, region: "r", pricePerHour: 0.01}) { hostToken host { id } } }', {}],
    ['removeStaticHost', 'mutation { removeStaticHost(id: "sh_nonexistent") { id } }', {}],
    ['setMarketOffers', 'mutation { setMarketOffers(offers: [{id: "free", gpuName: "H100", gpuMemoryGb: 80, region: "r", pricePerHour: 0.01, count: 100}]) { id } }', {}],
    ['updateMarketOffer', 'mutation($id: String!) { updateMarketOffer(id: $id, pricePerHour: 0.01) { id } }', { id: 'any' }],
    ['reclaimMarketOffer', 'mutation($id: String!) { reclaimMarketOffer(id: $id) }', { id: 'any' }],
    ['registerCatalogModel', 'mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }', {
      spec: { id: 'intruder/model', name: 'Intruder', modality: 'text', task: 'chat', engine: 'cpu', official: false, gpuMemoryGb: 1, inputModalities: ['text'], sizes: [], targetConcurrency: 2 },
    }],
    ['setCatalogModelEnabled', 'mutation($id: String!) { setCatalogModelEnabled(id: $id, enabled: false) { id } }', { id: CHAT_MODEL }],
    ['workspaceBudgets', 'query($id: ID!) { workspaceBudgets(workspaceId: $id) { budget scope limit } }', { id: other.workspaceId }],
    ['setWorkspaceBudget (its own)', 'mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "requests", scope: "key", value: 100000) { budget } }', { id: workspace.workspaceId }],
  ];

  it('operator operations refuse a workspace key (FORBIDDEN) and no or a bad token (UNAUTHENTICATED), and change nothing', async () => {
    const offersBefore = (await graphqlAs(test.url, workspace.apiKey)('{ gpuOffers { id pricePerHour available } }')).body.data.gpuOffers;
    const callers: Array<[string, string | null, string]> = [
      ['a workspace key', `Bearer ${workspace.apiKey}`, 'FORBIDDEN'],
      ['no token', null, 'UNAUTHENTICATED'],
      ['a revoked key', `Bearer ${keys.revoked}`, 'UNAUTHENTICATED'],
      ['the operator token with one more character', `Bearer ${OPERATOR_TOKEN}x`, 'UNAUTHENTICATED'],
      ['the operator token in upper case', `Bearer ${OPERATOR_TOKEN.toUpperCase()}`, 'UNAUTHENTICATED'],
    ];
    const outcomes = [];
    const expected = [];
    for (const [operation, query, variables] of operatorOperations()) {
      for (const [caller, authorization, code] of callers) {
        const answer = await graphql(test.url, authorization, query, variables);
        outcomes.push({ operation, caller, code: answer.body.errors?.[0]?.extensions.code, data: answer.body.data ?? null });
        expected.push({ operation, caller, code, data: null });
      }
    }
    expect(outcomes).toEqual(expected);

    // Nothing happened: the workspaces and their keys, the credit, the market, the hosts and the catalog are as before.
    const operator = graphqlAs(test.url, OPERATOR_TOKEN);
    const state = {
      ...(await operator('{ workspaces { id name creditBalance deletedAt } staticHosts { id } }')).body.data,
      ...(await graphqlAs(test.url, workspace.apiKey)('{ catalog { id } }')).body.data,
    };
    expect(state.workspaces.map((row: { name: string }) => row.name)).not.toContain('intruder');
    expect(state.workspaces).toEqual(expect.arrayContaining([
      expect.objectContaining({ id: workspace.workspaceId, creditBalance: null, deletedAt: null }),
      expect.objectContaining({ id: other.workspaceId, creditBalance: null, deletedAt: null }),
    ]));
    expect(state.staticHosts).toEqual([]);
    expect(state.catalog.map((model: { id: string }) => model.id)).toContain(CHAT_MODEL);
    const budgets = (await graphqlAs(test.url, workspace.apiKey)('{ budgets { budget scope limit overridden } }')).body.data.budgets;
    expect(budgets).toContainEqual({ budget: 'requests', scope: 'key', limit: 512, overridden: false });
    expect(state.catalog.map((model: { id: string }) => model.id)).not.toContain('intruder/model');
    expect((await graphqlAs(test.url, workspace.apiKey)('{ gpuOffers { id pricePerHour available } }')).body.data.gpuOffers).toEqual(offersBefore);
    expect((await call('POST', `${deployment.baseUrl}/chat/completions`, `Bearer ${workspace.apiKey}`, chatBody)).status).toBe(200);
    expect((await call('GET', `${otherDeployment.baseUrl}/models`, `Bearer ${other.apiKey}`)).status).toBe(200);
  });

  it('redeemSignInLink takes no key, operator token or made-up token for a sign-in link, and mints no key', async () => {
    const asWorkspace = graphqlAs(test.url, workspace.apiKey);
    const keysBefore = (await asWorkspace('{ apiKeys { id } }')).body.data.apiKeys.length;
    const tokens = ['', workspace.apiKey, OPERATOR_TOKEN, keys.revoked, 'csl-', `csl-${'A'.repeat(43)}`, `csl-${'A'.repeat(3000)}`];
    const outcomes = [];
    for (const token of tokens) {
      const answer = await graphql(test.url, null, 'mutation($token: String!) { redeemSignInLink(token: $token) { workspaceId apiKey } }', { token });
      outcomes.push({ token: token.slice(0, 12), code: answer.body.errors?.[0]?.extensions.code, data: answer.body.data ?? null });
    }
    expect(outcomes).toEqual(tokens.map((token) => ({ token: token.slice(0, 12), code: 'UNAUTHENTICATED', data: null })));
    expect((await asWorkspace('{ apiKeys { id } }')).body.data.apiKeys).toHaveLength(keysBefore);
  });

  it('a deleted workspace\'s key stays refused on its own deployment endpoint and over GraphQL', async () => {
    const answer = await graphql(test.url, `Bearer ${keys.deletedWorkspace}`, '{ creditBalance deployments { id } }');
    expect({ code: answer.body.errors?.[0]?.extensions.code, data: answer.body.data ?? null }).toEqual({ code: 'UNAUTHENTICATED', data: null });
    const [row] = await test.server.controlPlane.dataSource.query('SELECT slug FROM deployments WHERE workspace_id = $1', [keys.deletedWorkspaceId]);
    const models = await call('GET', `${test.url}/d/${row.slug}/v1/models`, `Bearer ${keys.deletedWorkspace}`);
    expect(openAIError(models)).toEqual(UNAUTHORIZED);
  });
});
