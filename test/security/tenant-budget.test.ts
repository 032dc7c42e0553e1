/**
 * The tenant budget's stored limits and its GraphQL surface (issue 33): local capacity is the
 * operator's to grant, a zero-credit workspace creates nothing that bills, deployments per
 * workspace hold under parallel creates, and an operator sets a workspace's limits.
 */
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { graphqlAs } from './support/security-client';

const OPERATOR_TOKEN = 'operator-token-for-the-budget-test-0123456789';

describe('tenant budget: what a workspace may create and hold', () => {
  let test: TestServer;
  const operator = () => graphqlAs(test.url, OPERATOR_TOKEN);
  const model = () => test.server.controlPlane.catalog.defaultChatModel().id;
  const activeLocalReplicas = async (workspaceId?: string) => Number((await test.server.controlPlane.dataSource.query(
    `SELECT count(*)::int AS count FROM replicas r JOIN deployments d ON d.id = r.deployment_id
     WHERE r.provider = 'local' AND r.status <> 'Terminated' AND ($1::text IS NULL OR d.workspace_id = $1)`, [workspaceId ?? null]))[0].count);

  async function openWorkspace(credit?: string): Promise<{ id: string; key: string }> {
    const created = await operator()(`mutation($name: String!, $credit: Decimal) { createWorkspace(name: $name, creditBalance: $credit) { plaintext workspace { id } } }`,
      { name: 'tenant', credit: credit ?? null });
    expect(created.body.errors).toBeUndefined();
    return { id: created.body.data.createWorkspace.workspace.id, key: created.body.data.createWorkspace.plaintext };
  }

  const createDeployment = (key: string, input: Record<string, unknown>) => graphqlAs(test.url, key)(
    'mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id status statusReason } } }', { input });

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: {
      operatorToken: OPERATOR_TOKEN,
      budgets: { local_replicas: { server: 3 }, deployments: { workspace: 4 }, stored_files: { workspace: 3 }, stored_bytes: { workspace: 10_000 }, active_batches: { workspace: 2 } },
    } });
  });
  afterAll(async () => {
    await test?.stop();
  });

  it('a workspace the operator did not grant local capacity is refused a local deployment (403 naming the budget), and starts no process', async () => {
    const tenant = await openWorkspace();
    const before = await activeLocalReplicas();
    const answer = await createDeployment(tenant.key, { modelId: model(), priceCapPerHour: 1, minReplicas: 2, maxReplicas: 8 });
    expect(answer.body.errors?.[0]?.extensions.code).toBe('FORBIDDEN');
    expect(answer.body.errors[0].message).toMatch(/local_replicas/);
    expect(await test.server.controlPlane.deployments.list(tenant.id)).toEqual([]);
    expect(await activeLocalReplicas()).toBe(before);
  });

  it('a zero-credit prepaid workspace creates no deployment that bills (402), whatever the provider', async () => {
    const broke = await openWorkspace('0');
    const market = await createDeployment(broke.key, { modelId: model(), priceCapPerHour: 5, minReplicas: 1, maxReplicas: 1, provider: 'market' });
    expect(market.body.errors?.[0]?.extensions.code).toBe('INSUFFICIENT_QUOTA');
    // Granted local capacity, it may use it: it is $0 here (LOCAL_PRICE_PER_HOUR).
    await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 1) { budget } }', { id: broke.id });
    const local = await createDeployment(broke.key, { modelId: model(), priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1 });
    expect(local.body.errors).toBeUndefined();
    await test.server.controlPlane.deployments.delete(broke.id, local.body.data.createDeployment.deployment.id);
  });

  it('local replicas stop at the workspace\'s grant and at the host\'s budget, and the deployment says why', async () => {
    const tenant = await openWorkspace();
    await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 2) { budget } }', { id: tenant.id });
    const answer = await createDeployment(tenant.key, { modelId: model(), priceCapPerHour: 1, minReplicas: 3, maxReplicas: 3 });
    expect(answer.body.errors).toBeUndefined();
    const id = answer.body.data.createDeployment.deployment.id;
    await waitFor(async () => (await test.server.controlPlane.deploymentStore.find(id))?.statusReason?.includes('local_replicas') ?? false, 10_000, 'the reason');
    expect(await activeLocalReplicas(tenant.id)).toBe(2);
    const reason = (await test.server.controlPlane.deploymentStore.find(id))!.statusReason!;
    expect(reason).toMatch(/2 of 3 replicas placed; budget 'local_replicas' is used up for this workspace/);

    // The host's budget (3) binds a second, granted workspace: one more replica fits.
    const second = await openWorkspace();
    await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 10) { budget } }', { id: second.id });
    const other = await createDeployment(second.key, { modelId: model(), priceCapPerHour: 1, minReplicas: 2, maxReplicas: 2 });
    const otherId = other.body.data.createDeployment.deployment.id;
    await waitFor(async () => (await test.server.controlPlane.deploymentStore.find(otherId))?.statusReason?.includes('this server') ?? false, 10_000, 'the host reason');
    expect(await activeLocalReplicas()).toBe(3);

    // Deleting gives the capacity back; the waiting deployment gets its replica on the next pass.
    await test.server.controlPlane.deployments.delete(tenant.id, id);
    await test.server.controlPlane.capacityLoop.wake();
    await waitFor(async () => (await activeLocalReplicas(second.id)) === 2, 15_000, 'the second workspace\'s replicas');
    await test.server.controlPlane.deployments.delete(second.id, otherId);
  });

  it('deployments per workspace hold under parallel creates: exactly the limit is created', async () => {
    const tenant = await openWorkspace();
    await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "local_replicas", scope: "workspace", value: 100) { budget } }', { id: tenant.id });
    // min 1 replica each, but the host budget (3) is not what this tests: external agents join by themselves.
    const answers = await Promise.all(Array.from({ length: 10 }, () => createDeployment(tenant.key, {
      modelId: model(), priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, provider: 'external',
    })));
    const created = answers.filter((answer) => !answer.body.errors);
    const refused = answers.filter((answer) => answer.body.errors);
    expect(created).toHaveLength(4);
    expect(refused.map((answer) => answer.body.errors[0].extensions.code)).toEqual(Array(6).fill('RATE_LIMITED'));
    expect(refused[0].body.errors[0].message).toMatch(/budget 'deployments' is used up for this workspace: 4 of at most 4/);
    expect((await test.server.controlPlane.deployments.list(tenant.id)).length).toBe(4);
  });

  it('the operator reads and sets a workspace\'s limits; the workspace sees its own; bad names are refused naming the allowed ones', async () => {
    const tenant = await openWorkspace();
    const set = await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "memory", scope: "workspace", value: 1048576) { budget scope limit default overridden } }', { id: tenant.id });
    expect(set.body.data.setWorkspaceBudget).toContainEqual({ budget: 'memory', scope: 'workspace', limit: 1048576, default: 256 * 1024 * 1024, overridden: true });
    const own = await graphqlAs(test.url, tenant.key)('{ budgets { budget scope limit overridden heldOnThisServer } }');
    expect(own.body.data.budgets).toContainEqual({ budget: 'memory', scope: 'workspace', limit: 1048576, overridden: true, heldOnThisServer: 0 });
    expect(test.server.controlPlane.workspaceBudgets.limitFor('memory', 'workspace', tenant.id)).toBe(1048576);

    const reset = await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "memory", scope: "workspace", value: null) { budget scope limit overridden } }', { id: tenant.id });
    expect(reset.body.data.setWorkspaceBudget).toContainEqual({ budget: 'memory', scope: 'workspace', limit: 256 * 1024 * 1024, overridden: false });

    const badName = await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "gpus", scope: "workspace", value: 1) { budget } }', { id: tenant.id });
    expect(badName.body.errors[0].extensions).toEqual({ code: 'BAD_USER_INPUT', param: 'budget' });
    expect(badName.body.errors[0].message).toContain('connections, requests, memory');
    const badScope = await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "connections", scope: "server", value: 1) { budget } }', { id: tenant.id });
    expect(badScope.body.errors[0].extensions).toEqual({ code: 'BAD_USER_INPUT', param: 'scope' });
    const negative = await operator()('mutation($id: ID!) { setWorkspaceBudget(workspaceId: $id, budget: "requests", scope: "key", value: -1) { budget } }', { id: tenant.id });
    expect(negative.body.errors[0].extensions).toEqual({ code: 'BAD_USER_INPUT', param: 'value' });
    const unknown = await operator()('mutation { setWorkspaceBudget(workspaceId: "ws_nope", budget: "requests", scope: "key", value: 1) { budget } }');
    expect(unknown.body.errors[0].extensions.code).toBe('NOT_FOUND');
  });

  it('files, their bytes and active batches hold per workspace under parallel uploads and creates: exactly the limit is stored', async () => {
    const tenant = await test.createWorkspace();
    const { baseUrl } = await test.createDeployment(tenant, { provider: 'external' });
    const line = JSON.stringify({ custom_id: 'a', method: 'POST', url: '/v1/chat/completions', body: { messages: [{ role: 'user', content: 'hi' }] } });
    const upload = async (content: string) => {
      const form = new FormData();
      form.set('purpose', 'batch');
      form.set('file', new Blob([content]), 'in.jsonl');
      const response = await fetch(`${baseUrl}/files`, { method: 'POST', headers: { authorization: `Bearer ${tenant.apiKey}` }, body: form });
      return { status: response.status, body: await response.json() };
    };
    const uploads = await Promise.all(Array.from({ length: 8 }, () => upload(line)));
    expect(uploads.filter((answer) => answer.status === 200)).toHaveLength(3);
    const refused = uploads.filter((answer) => answer.status !== 200);
    expect(refused.map((answer) => answer.status)).toEqual(Array(5).fill(429));
    expect(refused[0].body.error.message).toMatch(/budget 'stored_files' is used up for this workspace: 3 of at most 3/);
    const stored = await test.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM batch_files WHERE workspace_id = $1', [tenant.workspaceId]);
    expect(stored[0].count).toBe(3);

    // Bytes: deleting one file frees a place, and a file past the 10 kB left is refused for its bytes.
    const fileIds = uploads.filter((answer) => answer.status === 200).map((answer) => answer.body.id as string);
    expect((await fetch(`${baseUrl}/files/${fileIds[2]}`, { method: 'DELETE', headers: { authorization: `Bearer ${tenant.apiKey}` } })).status).toBe(200);
    const big = await upload(Array.from({ length: 100 }, (_, index) => line.replace('"a"', `"r${index}"`)).join('\n'));
    expect(big.status).toBe(429);
    expect(big.body.error.message).toMatch(/budget 'stored_bytes' is used up for this workspace/);

    const create = async () => {
      const response = await fetch(`${baseUrl}/batches`, {
        method: 'POST', headers: { authorization: `Bearer ${tenant.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ input_file_id: fileIds[0], endpoint: '/v1/chat/completions', completion_window: '24h' }),
      });
      return { status: response.status, body: await response.json() };
    };
    const batches = await Promise.all(Array.from({ length: 6 }, create));
    expect(batches.filter((answer) => answer.status === 200)).toHaveLength(2);
    expect(batches.filter((answer) => answer.status === 429)).toHaveLength(4);
    expect(batches.find((answer) => answer.status === 429)!.body.error.message).toMatch(/budget 'active_batches'/);
  });
});
