import { graphqlClient, OPERATOR_TOKEN } from '../capacity/support/graphql-client';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { chatOnce } from '../support/chat';

type Client = ReturnType<typeof graphqlClient>;

const CREATE = 'mutation($name: String!, $creditBalance: Decimal) { createWorkspace(name: $name, creditBalance: $creditBalance) { workspace { id name creditBalance deletedAt } apiKey { id name displayPrefix } plaintext } }';
const LIST = 'query($includeDeleted: Boolean!) { workspaces(includeDeleted: $includeDeleted) { id name creditBalance deletedAt } }';
const DELETE = 'mutation($id: ID!) { deleteWorkspace(id: $id) { id deletedAt creditBalance } }';
const CREDIT = 'mutation($workspaceId: ID!, $amount: Decimal!) { addCredit(workspaceId: $workspaceId, amount: $amount) }';
const LEDGER = 'query($from: DateTimeISO!, $to: DateTimeISO!, $kind: String, $limit: Int) { ledgerEntries(from: $from, to: $to, kind: $kind, limit: $limit) { kind amount modelId deploymentId replicaId promptTokens completionTokens pricePerHour createdAt } }';
const EARNINGS = 'query($from: DateTimeISO!, $to: DateTimeISO!, $groupBy: EarningsGrouping) { sharingEarnings(from: $from, to: $to, groupBy: $groupBy) { key requests promptTokens completionTokens earnings } }';
const range = () => ({ from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() });

/** Operator workspace administration and exact money over GraphQL, on a whole server. */
describe('workspaces and the ledger over GraphQL', () => {
  let test: TestServer;
  let operator: Client;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, localPricePerHour: 3.6, meteringIntervalMs: 100 } });
    operator = graphqlClient(test.url, OPERATOR_TOKEN);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const create = async (name: string, creditBalance?: unknown) => {
    const result = await operator(CREATE, { name, creditBalance });
    expect(result.errors).toBeUndefined();
    return result.data.createWorkspace as { workspace: { id: string; name: string; creditBalance: string | null }; apiKey: { id: string; name: string }; plaintext: string };
  };

  it('creates a workspace with its first key shown once, prepaid through a top_up row or postpaid, and lists them with balances', async () => {
    const acme = await create('  Acme Corp ', '12.5');
    expect(acme.workspace).toMatchObject({ name: 'Acme Corp', creditBalance: '12.5' });
    expect(acme.plaintext).toMatch(/^mk-/);
    expect(acme.apiKey).toMatchObject({ name: 'first key' });
    const asAcme = graphqlClient(test.url, acme.plaintext);
    expect((await asAcme('{ creditBalance apiKeys { id } }')).data).toEqual({ creditBalance: '12.5', apiKeys: [{ id: acme.apiKey.id }] });
    expect((await asAcme(LEDGER, range())).data.ledgerEntries).toEqual([expect.objectContaining({ kind: 'top_up', amount: '12.5', deploymentId: null, modelId: null })]);

    const postpaid = await create('postpaid');
    expect(postpaid.workspace.creditBalance).toBeNull();
    const empty = await create('empty', 0);
    expect(empty.workspace.creditBalance).toBe('0');
    expect((await graphqlClient(test.url, empty.plaintext)(LEDGER, range())).data.ledgerEntries).toEqual([]);

    const listed = (await operator(LIST, { includeDeleted: false })).data.workspaces;
    expect(listed).toEqual(expect.arrayContaining([
      { id: acme.workspace.id, name: 'Acme Corp', creditBalance: '12.5', deletedAt: null },
      { id: postpaid.workspace.id, name: 'postpaid', creditBalance: null, deletedAt: null },
      { id: empty.workspace.id, name: 'empty', creditBalance: '0', deletedAt: null },
    ]));
  });

  it('adds credit exactly: 0.1 + 0.2 is 0.3, and 10 decimal places survive', async () => {
    const { workspace, plaintext } = await create('exact');
    expect((await operator(CREDIT, { workspaceId: workspace.id, amount: 0.1 })).data.addCredit).toBe('0.1');
    expect((await operator(CREDIT, { workspaceId: workspace.id, amount: '0.2' })).data.addCredit).toBe('0.3');
    expect((await operator(`mutation { addCredit(workspaceId: "${workspace.id}", amount: 0.0000000001) }`)).data.addCredit).toBe('0.3000000001');
    expect((await graphqlClient(test.url, plaintext)('{ creditBalance }')).data.creditBalance).toBe('0.3000000001');
    const [{ equal }] = await test.server.controlPlane.dataSource.query(
      'SELECT w.credit_balance = sum(l.amount) AS equal FROM workspaces w JOIN billing_ledger l ON l.workspace_id = w.id WHERE w.id = $1 GROUP BY w.id', [workspace.id]);
    expect(equal).toBe(true);
  });

  it('refuses bad input naming the argument, and keeps the operations to the operator token', async () => {
    const cases: Array<[string, string, Record<string, unknown>, string, string]> = [
      ['empty name', CREATE, { name: '' }, 'BAD_USER_INPUT', 'name'],
      ['blank name', CREATE, { name: '   ' }, 'BAD_USER_INPUT', 'name'],
      ['101-character name', CREATE, { name: 'x'.repeat(101) }, 'BAD_USER_INPUT', 'name'],
      ['control character in name', CREATE, { name: 'a\u0007b' }, 'BAD_USER_INPUT', 'name'],
      ['negative credit', CREATE, { name: 'n', creditBalance: '-1' }, 'BAD_USER_INPUT', 'creditBalance'],
      ['11 decimal places', CREATE, { name: 'n', creditBalance: '1.00000000001' }, 'BAD_USER_INPUT', 'creditBalance'],
      ['credit over the limit', CREATE, { name: 'n', creditBalance: 1_000_001 }, 'BAD_USER_INPUT', 'creditBalance'],
      ['credit not a number', CREATE, { name: 'n', creditBalance: 'lots' }, 'BAD_USER_INPUT', 'creditBalance'],
      ['unknown workspace', DELETE, { id: 'ws_missing' }, 'NOT_FOUND', 'id'],
    ];
    const outcomes = [];
    for (const [label, query, variables] of cases) outcomes.push({ label, error: (await operator(query, variables)).errors?.[0].extensions });
    expect(outcomes).toEqual(cases.map(([label, , , code, param]) => ({ label, error: expect.objectContaining({ code, param }) })));
    expect((await operator(LIST, { includeDeleted: true })).data.workspaces.map((workspace: { name: string }) => workspace.name)).not.toContain('n');

    const { plaintext, workspace } = await create('not an operator');
    for (const [query, variables] of [[CREATE, { name: 'x' }], [LIST, { includeDeleted: false }], [DELETE, { id: workspace.id }], [CREDIT, { workspaceId: workspace.id, amount: '1' }]] as const) {
      expect((await operator(query, variables, plaintext)).errors?.[0].extensions.code).toBe('FORBIDDEN');
      expect((await operator(query, variables, 'mk-nobody')).errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    }
  });

  it('deleteWorkspace revokes its keys (401), deletes its deployments so metering stops, and keeps the workspace and its ledger', async () => {
    const doomed = await create('doomed', '100');
    await test.server.controlPlane.workspaceBudgets.set(doomed.workspace.id, 'local_replicas', 'workspace', 1);
    const deployment = await test.createDeployment({ workspaceId: doomed.workspace.id, apiKey: doomed.plaintext, apiKeyId: doomed.apiKey.id }, { priceCapPerHour: 5 });
    await test.waitForReplicas(deployment.id, 1);
    const chat = async () => (await chatOnce(deployment.baseUrl, doomed.plaintext)).status;
    expect(await chat()).toBe(200);
    const { dataSource } = test.server.controlPlane;
    await waitFor(async () => (await dataSource.query(`SELECT 1 FROM billing_ledger WHERE workspace_id = $1 AND kind = 'gpu_time' AND amount < 0`, [doomed.workspace.id])).length > 0, 5_000, 'GPU time billed');

    const deleted = (await operator(DELETE, { id: doomed.workspace.id })).data.deleteWorkspace;
    expect(deleted.deletedAt).not.toBeNull();
    expect(await chat()).toBe(401);
    expect((await graphqlClient(test.url, doomed.plaintext)('{ creditBalance }')).errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    const [row] = await dataSource.query('SELECT status FROM deployments WHERE id = $1', [deployment.id]);
    expect(row.status).toBe('Deleted');
    expect(await dataSource.query(`SELECT id FROM replicas WHERE deployment_id = $1 AND status <> 'Terminated'`, [deployment.id])).toEqual([]);

    // Metering has stopped: the ledger no longer grows, and it still adds up to the balance the operator sees.
    const books = async () => (await dataSource.query(
      'SELECT count(l.id)::int AS rows, w.credit_balance = sum(l.amount) AS equal FROM workspaces w JOIN billing_ledger l ON l.workspace_id = w.id WHERE w.id = $1 GROUP BY w.id',
      [doomed.workspace.id]))[0];
    const settled = await books();
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await books()).toEqual(settled);
    expect(settled.equal).toBe(true);
    expect(Number(deleted.creditBalance)).toBeLessThan(100);

    expect((await operator(LIST, { includeDeleted: false })).data.workspaces.map((workspace: { id: string }) => workspace.id)).not.toContain(doomed.workspace.id);
    expect((await operator(LIST, { includeDeleted: true })).data.workspaces).toEqual(expect.arrayContaining([expect.objectContaining({ id: doomed.workspace.id, deletedAt: deleted.deletedAt })]));
    expect((await operator(CREDIT, { workspaceId: doomed.workspace.id, amount: '1' })).errors?.[0].extensions).toMatchObject({ code: 'NOT_FOUND', param: 'workspaceId' });
    // Deleting again changes nothing and answers the same.
    expect((await operator(DELETE, { id: doomed.workspace.id })).data.deleteWorkspace).toEqual(deleted);
  });

  it('shows a guest its spending by model only, and an owner its earnings without the guest', async () => {
    const guest = await create('guest', '1');
    const owner = await create('owner');
    const shared = test.server.controlPlane.sharedBilling;
    const prices = { inputPerMillion: '0.18', outputPerMillion: '0.6' };
    for (const [sharedRequestId, promptTokens, completionTokens] of [['shr_a', 1, 0], ['shr_b', 1_000, 2_000]] as const) {
      await shared.settleMany([{
        sharedRequestId, guestWorkspaceId: guest.workspace.id, ownerWorkspaceId: owner.workspace.id, deploymentId: 'dep_owners_shared', modelId: 'org/model',
        promptTokens, completionTokens, prices,
      }]);
    }
    const asGuest = graphqlClient(test.url, guest.plaintext);
    const spending = (await asGuest(LEDGER, { ...range(), kind: 'guest_debit' })).data.ledgerEntries;
    expect(spending).toEqual([
      expect.objectContaining({ kind: 'guest_debit', amount: '-0.00138', modelId: 'org/model', deploymentId: null, promptTokens: 1_000, completionTokens: 2_000 }),
      expect.objectContaining({ kind: 'guest_debit', amount: '-0.00000018', modelId: 'org/model', deploymentId: null, promptTokens: 1, completionTokens: 0 }),
    ]);
    expect((await asGuest('{ creditBalance }')).data.creditBalance).toBe('0.99861982');
    expect((await asGuest(LEDGER, { ...range(), limit: 1 })).data.ledgerEntries).toHaveLength(1);

    const asOwner = graphqlClient(test.url, owner.plaintext);
    const byDay = (await asOwner(EARNINGS, { ...range(), groupBy: 'DAY' })).data.sharingEarnings;
    expect(byDay).toEqual([{ key: new Date().toISOString().slice(0, 10), requests: 2, promptTokens: 1_001, completionTokens: 2_000, earnings: '0.00138018' }]);
    expect((await asOwner(EARNINGS, { ...range(), groupBy: 'DEPLOYMENT' })).data.sharingEarnings)
      .toEqual([{ key: 'dep_owners_shared', requests: 2, promptTokens: 1_001, completionTokens: 2_000, earnings: '0.00138018' }]);
    const ownerView = JSON.stringify(await asOwner(LEDGER, range()));
    expect(ownerView).toContain('owner_credit');
    expect(ownerView).not.toContain(guest.workspace.id);
    expect(ownerView).not.toContain('shr_');
    // A postpaid owner's balance stays null; its earnings are in the ledger.
    expect((await asOwner('{ creditBalance }')).data.creditBalance).toBeNull();

    const refused = [
      [LEDGER, { ...range(), kind: 'refund' }, 'kind'], [LEDGER, { ...range(), limit: 0 }, 'limit'], [LEDGER, { ...range(), limit: 201 }, 'limit'],
      [LEDGER, { from: '2025-01-02T00:00:00Z', to: '2025-01-01T00:00:00Z' }, 'to'], [EARNINGS, { from: '2024-01-01T00:00:00Z', to: '2025-06-01T00:00:00Z' }, 'to'],
    ] as const;
    for (const [query, variables, param] of refused) {
      expect({ param, error: (await asGuest(query, variables)).errors?.[0].extensions }).toEqual({ param, error: expect.objectContaining({ code: 'BAD_USER_INPUT', param }) });
    }
    expect((await asGuest(EARNINGS, { ...range(), groupBy: 'WEEK' })).errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
  });
});
