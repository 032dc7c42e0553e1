import { serverForSuite, type TestWorkspace } from '../support/test-server';
import { graphqlClient, OPERATOR_TOKEN } from '../capacity/support/graphql-client';

type Client = ReturnType<typeof graphqlClient>;
/** [what is sent, query, variables, expected code, expected param, what the message must say] */
type Case = [string, string, Record<string, unknown>, 'BAD_USER_INPUT' | 'NOT_FOUND', string, RegExp];

/**
 * Every case runs, then all outcomes are compared at once, so a failure shows every
 * operation that answers wrongly rather than the first one.
 */
async function expectRefused(call: Client, cases: Case[]): Promise<void> {
  const outcomes = [];
  for (const [label, query, variables] of cases) {
    const result = await call(query, variables);
    outcomes.push({ label, data: result.data ?? null, error: result.errors?.[0] ?? null });
  }
  expect(outcomes).toEqual(cases.map(([label, , , code, param, message]) => ({
    label, data: null, error: expect.objectContaining({ message: expect.stringMatching(message), extensions: expect.objectContaining({ code, param }) }),
  })));
}

const HOST = { name: 'box-1', gpuName: 'RTX 4090', gpuMemoryGb: 24, region: 'us-east', pricePerHour: 0.5 };
const MODEL = {
  id: 'test/bad-input-model', name: 'Bad input model', modality: 'text', task: 'chat', engine: 'vllm', official: false,
  gpuMemoryGb: 24, inputModalities: ['text'], sizes: [], targetConcurrency: 8,
};

/** Bad arguments to GraphQL operations are refused naming the argument (or field) and what is allowed. */
describe('GraphQL refuses bad input', () => {
  const test = serverForSuite({ controlPlane: { operatorToken: OPERATOR_TOKEN } });
  let workspace: TestWorkspace;
  let graphql: Client;
  let operator: Client;

  beforeAll(async () => {
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    operator = graphqlClient(test.url, OPERATOR_TOKEN);
  });

  it('costs and usage: an unknown groupBy, to not after from, a range over 366 days', async () => {
    const from = '2025-01-01T00:00:00.000Z';
    const costs = 'query($from: DateTimeISO!, $to: DateTimeISO!, $groupBy: String!) { costs(from: $from, to: $to, groupBy: $groupBy) { key } }';
    const usage = 'query($from: DateTimeISO!, $to: DateTimeISO!, $groupBy: String!) { usage(from: $from, to: $to, groupBy: $groupBy) { key } }';
    const day = { from, to: '2025-01-02T00:00:00.000Z' };
    const accepted = await graphql(costs, { ...day, groupBy: 'replica' });
    expect(accepted).toEqual({ data: { costs: [] } });

    await expectRefused(graphql, [
      ['costs groupBy week', costs, { ...day, groupBy: 'week' }, 'BAD_USER_INPUT', 'groupBy', /groupBy must be one of day, deployment, replica$/],
      // api_key groups usage, not costs (and replica the other way round).
      ['costs groupBy api_key', costs, { ...day, groupBy: 'api_key' }, 'BAD_USER_INPUT', 'groupBy', /groupBy must be one of day, deployment, replica$/],
      ['usage groupBy replica', usage, { ...day, groupBy: 'replica' }, 'BAD_USER_INPUT', 'groupBy', /groupBy must be one of day, deployment, api_key, adapter$/],
      ['costs to = from', costs, { from, to: from, groupBy: 'day' }, 'BAD_USER_INPUT', 'to', /to must be after from/],
      ['costs to < from', costs, { from, to: '2024-12-31T00:00:00.000Z', groupBy: 'day' }, 'BAD_USER_INPUT', 'to', /to must be after from/],
      ['usage to < from', usage, { from, to: '2024-12-31T00:00:00.000Z', groupBy: 'day' }, 'BAD_USER_INPUT', 'to', /to must be after from/],
      ['usage over 366 days', usage, { from, to: '2026-01-03T00:00:00.000Z', groupBy: 'day' }, 'BAD_USER_INPUT', 'to', /at most 366 days/],
    ]);
  });

  it('addCredit: an amount out of (0, 1000000], not a decimal, or past 10 decimal places, and an unknown workspace; the balance is unchanged', async () => {
    const credit = 'mutation($workspaceId: ID!, $amount: Decimal!) { addCredit(workspaceId: $workspaceId, amount: $amount) }';
    const amountRule = /^amount must be a decimal above 0 up to 1000000 with at most 10 decimal places, got /;
    const workspaceId = workspace.workspaceId;
    await expectRefused(operator, [
      ['amount 0', credit, { workspaceId, amount: 0 }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "0.0"', credit, { workspaceId, amount: '0.0' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount -5', credit, { workspaceId, amount: -5 }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "-0.01"', credit, { workspaceId, amount: '-0.01' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount 1000000.01', credit, { workspaceId, amount: 1_000_000.01 }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "1e7"', credit, { workspaceId, amount: '1e7' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "NaN"', credit, { workspaceId, amount: 'NaN' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "Infinity"', credit, { workspaceId, amount: 'Infinity' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount "ten"', credit, { workspaceId, amount: 'ten' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount ""', credit, { workspaceId, amount: '' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount with 11 decimal places', credit, { workspaceId, amount: '0.00000000001' }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['amount 1e-11', credit, { workspaceId, amount: 1e-11 }, 'BAD_USER_INPUT', 'amount', amountRule],
      ['literal amount "abc"', `mutation { addCredit(workspaceId: "${workspaceId}", amount: "abc") }`, {}, 'BAD_USER_INPUT', 'amount', amountRule],
      ['unknown workspace', credit, { workspaceId: 'ws_0000', amount: 10 }, 'NOT_FOUND', 'workspaceId', /no workspace 'ws_0000'/],
    ]);
    expect((await graphql('{ creditBalance }')).data).toEqual({ creditBalance: null });
    // The upper bound itself is allowed, as a number or a string, and so are 10 decimal places.
    const other = await test.createWorkspace();
    expect((await operator(credit, { workspaceId: other.workspaceId, amount: 1_000_000 })).data).toEqual({ addCredit: '1000000' });
    expect((await operator(credit, { workspaceId: other.workspaceId, amount: '0.0000000001' })).data).toEqual({ addCredit: '1000000.0000000001' });
    // A boolean is no decimal at all: refused by the schema before the operation runs.
    expect((await operator(credit, { workspaceId: other.workspaceId, amount: true })).errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  it('registerStaticHost: each out-of-range field is refused naming it; no host is registered', async () => {
    const host = 'mutation($input: StaticHostInput!) { registerStaticHost(input: $input) { hostToken } }';
    await expectRefused(operator, [
      ['blank name', host, { input: { ...HOST, name: '  ' } }, 'BAD_USER_INPUT', 'name', /name must not be empty/],
      ['blank gpuName', host, { input: { ...HOST, gpuName: '' } }, 'BAD_USER_INPUT', 'gpuName', /gpuName must not be empty/],
      ['gpuMemoryGb 0', host, { input: { ...HOST, gpuMemoryGb: 0 } }, 'BAD_USER_INPUT', 'gpuMemoryGb', /gpuMemoryGb must be a number from 0.01 to 10000/],
      // The column keeps two decimals with CHECK > 0: the smallest double passed "above 0" and failed the CHECK as a 500.
      ['gpuMemoryGb 5e-324', host, { input: { ...HOST, gpuMemoryGb: 5e-324 } }, 'BAD_USER_INPUT', 'gpuMemoryGb', /gpuMemoryGb must be a number from 0.01 to 10000/],
      // The limit is 10000 GB: the message has to say so, not only "above 0".
      ['gpuMemoryGb 20000', host, { input: { ...HOST, gpuMemoryGb: 20_000 } }, 'BAD_USER_INPUT', 'gpuMemoryGb', /gpuMemoryGb must be .*10000/],
      ['region "US East"', host, { input: { ...HOST, region: 'US East' } }, 'BAD_USER_INPUT', 'region', /region must be 1-64 lowercase letters, digits or "-"/],
      ['pricePerHour -1', host, { input: { ...HOST, pricePerHour: -1 } }, 'BAD_USER_INPUT', 'pricePerHour', /pricePerHour must be from 0 to 1000/],
      ['pricePerHour 1001', host, { input: { ...HOST, pricePerHour: 1001 } }, 'BAD_USER_INPUT', 'pricePerHour', /pricePerHour must be from 0 to 1000/],
    ]);
    expect((await operator('{ staticHosts { id } }')).data).toEqual({ staticHosts: [] });
  });

  it('registerCatalogModel: a spec failing the catalog schema is refused naming its field and not added', async () => {
    const register = 'mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }';
    await expectRefused(operator, [
      ['empty spec', register, { spec: {} }, 'BAD_USER_INPUT', 'id', /^invalid catalog model: id: .*expected string/],
      ['modality audio', register, { spec: { ...MODEL, modality: 'audio' } }, 'BAD_USER_INPUT', 'modality', /^invalid catalog model: modality: .*"text".*"image".*"video"/],
      ['gpuMemoryGb 0', register, { spec: { ...MODEL, gpuMemoryGb: 0 } }, 'BAD_USER_INPUT', 'gpuMemoryGb', /^invalid catalog model: gpuMemoryGb: .*>0/],
      ['negative shared price', register, { spec: { ...MODEL, sharedPricing: { inputPerMillion: -1, outputPerMillion: 0 } } },
        'BAD_USER_INPUT', 'sharedPricing', /^invalid catalog model: sharedPricing\.inputPerMillion: .*>=0/],
    ]);
    const catalog = (await graphql('{ catalog { id } }')).data.catalog.map((model: { id: string }) => model.id);
    expect(catalog).not.toContain(MODEL.id);
  });

  it('webhooks: graceSeconds and limit out of range; the secret is not rotated', async () => {
    const before = (await graphql('{ webhookSigningSecret { secret rotatedAt } }')).data.webhookSigningSecret;
    const rotate = 'mutation($graceSeconds: Int) { rotateWebhookSigningSecret(graceSeconds: $graceSeconds) { secret } }';
    const deliveries = 'query($limit: Int!) { webhookDeliveries(limit: $limit) { id } }';
    const graceRule = /graceSeconds must be an integer from 0 to 604800/;
    await expectRefused(graphql, [
      ['graceSeconds -1', rotate, { graceSeconds: -1 }, 'BAD_USER_INPUT', 'graceSeconds', graceRule],
      ['graceSeconds 604801', rotate, { graceSeconds: 604_801 }, 'BAD_USER_INPUT', 'graceSeconds', graceRule],
      ['limit 0', deliveries, { limit: 0 }, 'BAD_USER_INPUT', 'limit', /limit must be an integer from 1 to 200/],
      ['limit 201', deliveries, { limit: 201 }, 'BAD_USER_INPUT', 'limit', /limit must be an integer from 1 to 200/],
    ]);
    expect((await graphql('{ webhookSigningSecret { secret rotatedAt } }')).data.webhookSigningSecret).toEqual(before);
    expect((await graphql(deliveries, { limit: 200 })).data).toEqual({ webhookDeliveries: [] });
  });

  it('updateDeployment with both storage settings, and unknown storage credential and request ids', async () => {
    // External: no agent process is started; an image model, where a storage credential applies.
    const deployment = await test.createDeployment(workspace, { provider: 'external', modelId: 'black-forest-labs/FLUX.1-schnell' });
    const other = await test.createWorkspace();
    const foreign = await test.server.controlPlane.storageCredentials.create(other.workspaceId, {
      name: 'theirs', region: 'us-east-1', bucket: 'their-bucket', accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'secret-example',
    });
    const update = 'mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { id } }';
    const remove = 'mutation($id: Int!) { deleteStorageCredential(id: $id) { id } }';
    const request = 'query($id: ID!) { request(id: $id) { id } }';
    await expectRefused(graphql, [
      ['storageCredentialId with clearStorageCredential', update, { id: deployment.id, input: { storageCredentialId: foreign.id, clearStorageCredential: true } },
        'BAD_USER_INPUT', 'clearStorageCredential', /send storageCredentialId or clearStorageCredential, not both/],
      ['credential 999999', remove, { id: 999_999 }, 'NOT_FOUND', 'id', /no storage credential 999999 in this workspace/],
      ['credential 0', remove, { id: 0 }, 'NOT_FOUND', 'id', /no storage credential 0 in this workspace/],
      // Another workspace's credential is indistinguishable from an unknown one.
      ['another workspace\'s credential', remove, { id: foreign.id }, 'NOT_FOUND', 'id', new RegExp(`no storage credential ${foreign.id} in this workspace`)],
      ['request req_0', request, { id: 'req_0' }, 'NOT_FOUND', 'id', /no request 'req_0'/],
      ['request not-an-id', request, { id: 'not-an-id' }, 'NOT_FOUND', 'id', /no request 'not-an-id'/],
    ]);
    const after = await graphql('query($id: ID!) { deployment(id: $id) { storageCredentialId } }', { id: deployment.id });
    expect(after.data).toEqual({ deployment: { storageCredentialId: null } });
    expect(await test.server.controlPlane.storageCredentials.get(other.workspaceId, foreign.id)).toMatchObject({ id: foreign.id, deletedAt: null });
  });

  it('routingPolicy outside prefix-aware, least-loaded, round-robin, on create and update; the setting is unchanged', async () => {
    const deployment = await test.createDeployment(workspace, { provider: 'external' });
    const update = 'mutation($id: ID!, $input: UpdateDeploymentInput!) { updateDeployment(id: $id, input: $input) { id } }';
    const create = 'mutation($input: CreateDeploymentInput!) { createDeployment(input: $input) { deployment { id } } }';
    const rule = /routingPolicy must be one of 'prefix-aware', 'least-loaded', 'round-robin'/;
    await expectRefused(graphql, [
      ['update to "random"', update, { id: deployment.id, input: { routingPolicy: 'random' } }, 'BAD_USER_INPUT', 'routingPolicy', rule],
      ['update to ""', update, { id: deployment.id, input: { routingPolicy: '' } }, 'BAD_USER_INPUT', 'routingPolicy', rule],
      ['create with "PREFIX-AWARE"', create, { input: { modelId: 'meta-llama/Llama-3.1-8B-Instruct', priceCapPerHour: 5, provider: 'external', routingPolicy: 'PREFIX-AWARE' } },
        'BAD_USER_INPUT', 'routingPolicy', rule],
    ]);
    const after = await graphql('query($id: ID!) { deployment(id: $id) { routingPolicy } }', { id: deployment.id });
    expect(after.data).toEqual({ deployment: { routingPolicy: 'prefix-aware' } });
  });
});
