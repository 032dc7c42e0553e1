import fs from 'node:fs';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { Client } from 'pg';
import { printGatewaySchema, SCHEMA_FILE } from '../../gateway/graphql/emit-schema';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { chatOnce } from '../support/chat';

/** The GraphQL skeleton: keys, catalog, deployments, and the deploymentUpdated subscription. */
describe('GraphQL API', () => {
  let test: TestServer;
  let workspace: TestWorkspace;

  const graphql = async (query: string, variables: Record<string, unknown> = {}, key: string | null = workspace.apiKey) => {
    const response = await fetch(`${test.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.json()) as { data?: any; errors?: Array<{ message: string; extensions: { code: string; param?: string } }> };
  };

  const chatStatus = async (baseUrl: string, key: string) => (await chatOnce(baseUrl, key)).status;

  beforeAll(async () => {
    test = await startTestServer();
    workspace = await test.createWorkspace();
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('checked-in schema.graphql matches the resolvers (run `npm run schema` after changing them)', () => {
    expect(fs.readFileSync(SCHEMA_FILE, 'utf8')).toBe(printGatewaySchema());
  });

  it('refuses calls without a valid workspace key', async () => {
    const result = await graphql('{ deployments { id } }', {}, null);
    expect(result.errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    expect((await graphql('{ apiKeys { id } }', {}, 'mk-wrong')).errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
  });

  it('lists the catalog with every required kind of model', async () => {
    const { data } = await graphql('{ catalog { id modality task official sizes inputModalities videoSpec { durationSeconds fps } } }');
    const catalog = data.catalog as Array<{ modality: string; task: string; inputModalities: string[]; videoSpec: unknown; sizes: string[] }>;
    expect(catalog.some((model) => model.task === 'chat')).toBe(true);
    expect(catalog.some((model) => model.task === 'completion')).toBe(true);
    expect(catalog.some((model) => model.modality === 'image' && !model.inputModalities.includes('image'))).toBe(true);
    expect(catalog.some((model) => model.modality === 'image' && model.inputModalities.includes('image'))).toBe(true);
    expect(catalog.some((model) => model.modality === 'video' && model.videoSpec)).toBe(true);
    expect(catalog.some((model) => model.modality === 'video' && !model.videoSpec)).toBe(true);
    expect(catalog.filter((model) => model.modality !== 'text').every((model) => model.sizes.length > 0)).toBe(true);
  });

  it('creates a key shown once and stored only as a hash; regenerate kills the old key at once; revoke too', async () => {
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const created = await graphql('mutation($input: CreateApiKeyInput!) { createApiKey(input: $input) { plaintext apiKey { id name rpmLimit tpdLimit displayPrefix } } }',
      { input: { name: 'ci', rpmLimit: 50, tpdLimit: 5000 } });
    const { plaintext, apiKey } = created.data.createApiKey;
    expect(plaintext).toMatch(/^mk-[A-Za-z0-9_-]{43}$/);
    expect(apiKey).toMatchObject({ name: 'ci', rpmLimit: 50, tpdLimit: 5000, displayPrefix: plaintext.slice(0, 7) });

    const database = new Client({ connectionString: test.databaseUrl });
    await database.connect();
    const stored = await database.query('SELECT * FROM api_keys WHERE id = $1', [apiKey.id]);
    await database.end();
    expect(JSON.stringify(stored.rows)).not.toContain(plaintext);
    expect(stored.rows[0].key_hash).toMatch(/^[0-9a-f]{64}$/);

    const listed = await graphql('{ apiKeys { id displayPrefix } }');
    expect(JSON.stringify(listed.data)).not.toContain(plaintext);
    expect(await chatStatus(deployment.baseUrl, plaintext)).toBe(200);

    const regenerated = await graphql('mutation($id: ID!) { regenerateApiKey(id: $id) { plaintext apiKey { id } } }', { id: apiKey.id });
    const fresh = regenerated.data.regenerateApiKey.plaintext;
    expect(fresh).not.toBe(plaintext);
    expect(await chatStatus(deployment.baseUrl, plaintext)).toBe(401);
    expect(await chatStatus(deployment.baseUrl, fresh)).toBe(200);

    await graphql('mutation($id: ID!) { revokeApiKey(id: $id) { id } }', { id: apiKey.id });
    expect(await chatStatus(deployment.baseUrl, fresh)).toBe(401);
  });

  it('sets per-key limits and refuses invalid ones naming the field', async () => {
    const created = await graphql('mutation { createApiKey(input: {name: "limits"}) { apiKey { id rpmLimit tpdLimit } } }');
    const { id, rpmLimit, tpdLimit } = created.data.createApiKey.apiKey;
    expect(rpmLimit).toBe(600);
    expect(tpdLimit).toBe(1_000_000);
    const updated = await graphql('mutation($id: ID!) { setApiKeyLimits(id: $id, limits: {rpmLimit: 7}) { rpmLimit tpdLimit } }', { id });
    expect(updated.data.setApiKeyLimits).toEqual({ rpmLimit: 7, tpdLimit: 1_000_000 });
    const bad = await graphql('mutation($id: ID!) { setApiKeyLimits(id: $id, limits: {rpmLimit: 0}) { rpmLimit } }', { id });
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'rpmLimit' });
    const other = await test.createWorkspace();
    const foreign = await graphql('mutation($id: ID!) { revokeApiKey(id: $id) { id } }', { id }, other.apiKey);
    expect(foreign.errors?.[0].extensions.code).toBe('NOT_FOUND');
  });

  it.each([
    [{ modelId: 'nope/nope', priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1 }, 'model', 'NOT_FOUND'],
    [{ modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 0, minReplicas: 1, maxReplicas: 1 }, 'priceCapPerHour', 'BAD_USER_INPUT'],
    [{ modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 1, minReplicas: 0, maxReplicas: 1 }, 'minReplicas', 'BAD_USER_INPUT'],
    [{ modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 1, minReplicas: 2, maxReplicas: 1 }, 'maxReplicas', 'BAD_USER_INPUT'],
    [{ modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, provider: 'moon' }, 'provider', 'BAD_USER_INPUT'],
  ])('createDeployment refuses %j naming %s', async (input, param, code) => {
    const result = await graphql('mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id } } }', { input });
    expect(result.errors?.[0].extensions).toMatchObject({ code, param });
  });

  it('creates a deployment and streams its Creating → Running → Paused updates to a subscriber', async () => {
    const heldBefore = test.server.gateway.subscriptions.size;
    const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
    const seen: Array<{ id: string; status: string }> = [];
    const subscription = client.iterate<{ deploymentUpdated: { id: string; status: string } }>({ query: 'subscription { deploymentUpdated { id status baseUrl } }' });
    const collecting = (async () => {
      for await (const event of subscription) seen.push(event.data!.deploymentUpdated);
    })().catch(() => {});
    try {
      // Live once the hub holds it (a fixed sleep could end before the subscribe arrived on a loaded machine).
      await waitFor(() => test.server.gateway.subscriptions.size > heldBefore, 10_000, 'the subscription held');
      const other = await test.createWorkspace();
      await test.createDeployment(other);

      const created = await graphql(`mutation { createDeployment(input: {modelId: "meta-llama/Llama-3.1-8B-Instruct", priceCapPerHour: 1.5, minReplicas: 1, maxReplicas: 2}) {
        deployment { id status baseUrl minReplicas maxReplicas autoscale priceCapPerHour } joinToken } }`);
      const deployment = created.data.createDeployment.deployment;
      expect(deployment).toMatchObject({ status: 'Creating', minReplicas: 1, maxReplicas: 2, autoscale: false, priceCapPerHour: 1.5 });
      expect(deployment.baseUrl).toMatch(/\/d\/llama-3-1-8b-instruct-[0-9a-f]{6}\/v1$/);
      expect(created.data.createDeployment.joinToken).toBeNull();
      await test.waitForReplicas(deployment.id, 1);
      await graphql('mutation($id: ID!) { pauseDeployment(id: $id) { status } }', { id: deployment.id });
      const illegal = await graphql('mutation($id: ID!) { pauseDeployment(id: $id) { status } }', { id: deployment.id });
      expect(illegal.errors?.[0].extensions.code).toBe('INVALID_STATE_TRANSITION');
      const queried = await graphql('query($id: ID!) { deployment(id: $id) { status replicas { status } } }', { id: deployment.id });
      expect(queried.data.deployment.status).toBe('Paused');
      expect(queried.data.deployment.replicas.every((replica: { status: string }) => replica.status === 'Terminated')).toBe(true);

      // A change of its replicas (one placed, ready or ended) fires the event too, with the status unchanged: each status once, in order.
      const statuses = () => seen.filter((event) => event.id === deployment.id).map((event) => event.status)
        .filter((status, index, all) => index === 0 || all[index - 1] !== status);
      const deadline = Date.now() + 5_000;
      while (statuses().length < 3 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(statuses()).toEqual(['Creating', 'Running', 'Paused']);
      expect(seen.every((event) => event.id === deployment.id)).toBe(true);
    } finally {
      await client.dispose();
      await collecting;
    }
  });

  it('lists a deployment\'s requests, refusing a bad status or limit naming the argument', async () => {
    const { id } = await test.createDeployment(workspace);
    const ok = await graphql('query($id: ID!) { requests(deploymentId: $id, status: "queued", limit: 5) { id } }', { id });
    expect(ok).toEqual({ data: { requests: [] } });
    const cases: Array<[Record<string, unknown>, string, string]> = [
      [{ status: 'done' }, 'status', 'status must be one of queued, running, succeeded, failed, canceled'],
      [{ limit: 0 }, 'limit', 'limit must be an integer from 1 to 200'],
      [{ limit: 201 }, 'limit', 'limit must be an integer from 1 to 200'],
    ];
    for (const [variables, param, message] of cases) {
      const result = await graphql('query($id: ID!, $status: String, $limit: Int) { requests(deploymentId: $id, status: $status, limit: $limit) { id } }', { id, ...variables });
      expect(result.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', param } });
      expect(result.errors?.[0].message).toContain(message);
    }
  });

  it('refuses a subscription without a valid key', async () => {
    const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: 'Bearer mk-bad' }, retryAttempts: 0 });
    const subscription = client.iterate({ query: 'subscription { deploymentUpdated { id } }' });
    await expect(subscription.next()).rejects.toBeTruthy();
    await client.dispose();
  });
});
