import { canonicalMoney } from '../../control-plane/billing/money';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient, OPERATOR_TOKEN } from './support/graphql-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct'; // needs 24 GB of GPU memory

/**
 * The market provider under a price cap: nothing at or under the cap → the deployment says so
 * and waits; an offer appears → placed on it; a reclaimed machine → replaced. Then the ledger
 * against the replicas' own lifetimes, to the cent, and the credit it debited.
 */
describe('market provider, price cap and billing', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;
  let operator: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { capacityIntervalMs: 100, meteringIntervalMs: 100, marketPriceDriftIntervalMs: 0, operatorToken: OPERATOR_TOKEN } });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    operator = graphqlClient(test.url, OPERATOR_TOKEN);
    const market = await operator(`mutation { setMarketOffers(offers: [
      {id: "rtx-4090-us-east", gpuName: "RTX 4090", gpuMemoryGb: 24, region: "us-east", pricePerHour: 0.9, count: 2},
      {id: "l40s-eu", gpuName: "L40S", gpuMemoryGb: 48, region: "eu-central", pricePerHour: 1.4, count: 2},
      {id: "t4-us-west", gpuName: "T4", gpuMemoryGb: 16, region: "us-west", pricePerHour: 0.2, count: 4}]) { id available } }`);
    expect(market.errors).toBeUndefined();
  });

  afterAll(async () => {
    await test?.stop();
  });

  const deployment = async (id: string) => (await graphql(`query($id: ID!) { deployment(id: $id) {
    status statusReason replicas { id status offerId gpuName region pricePerHour startedAt terminatedAt } } }`, { id })).data.deployment;

  it('waits with a reason while no offer fits under the cap, places on the cheapest fitting one when it appears, and replaces a reclaimed machine', async () => {
    const offers = (await graphql('{ gpuOffers(provider: "market") { id pricePerHour available } }')).data.gpuOffers;
    expect(offers.map((offer: any) => offer.id)).toEqual(['market:t4-us-west', 'market:rtx-4090-us-east', 'market:l40s-eu']);

    const created = await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 0.5, provider: "market"}) { deployment { id } } }`);
    const id = created.data.createDeployment.deployment.id;
    // The T4 is under the cap but too small (16 GB < 24 GB); the 4090 fits but costs $0.90.
    await waitFor(async () => (await deployment(id)).statusReason?.includes('no offer at or under $0.50/h'), 5_000, 'the placement reason');
    const waiting = await deployment(id);
    expect(waiting.status).toBe('Creating');
    expect(waiting.statusReason).toContain('RTX 4090');
    expect(waiting.replicas).toHaveLength(0);

    await operator('mutation { updateMarketOffer(id: "rtx-4090-us-east", pricePerHour: 0.45) { id } }');
    await waitFor(async () => (await deployment(id)).status === 'Running', 20_000, 'placement on the cheaper offer');
    const running = await deployment(id);
    expect(running.statusReason).toBeNull();
    expect(running.replicas[0]).toMatchObject({ status: 'Running', offerId: 'market:rtx-4090-us-east', gpuName: 'RTX 4090', region: 'us-east', pricePerHour: 0.45 });

    // The market takes the 4090s back; the only fitting machine left (L40S at $1.40) is over the cap.
    const reclaimed = (await operator('mutation { reclaimMarketOffer(id: "rtx-4090-us-east") }')).data.reclaimMarketOffer;
    expect(reclaimed).toEqual([running.replicas[0].id]);
    await waitFor(async () => (await deployment(id)).statusReason?.includes('no offer at or under'), 10_000, 'the new placement reason');
    await graphql(`mutation($id: ID!) { updateDeployment(id: $id, input: {priceCapPerHour: 1.5}) { id } }`, { id });
    await waitFor(async () => (await deployment(id)).replicas.some((replica: any) => replica.status === 'Running' && replica.offerId === 'market:l40s-eu'), 20_000, 'a replacement on the L40S');
    await graphql(`mutation($id: ID!) { deleteDeployment(id: $id) { id } }`, { id });
  });

  it('bills running replicas per second: the ledger equals lifetimes × prices to the cent, costs add up by every grouping, credit is debited', async () => {
    const [{ creditedAt }] = await test.server.controlPlane.dataSource.query('SELECT clock_timestamp() AS "creditedAt"');
    await operator(`mutation($workspaceId: ID!) { addCredit(workspaceId: $workspaceId, amount: 100) }`, { workspaceId: workspace.workspaceId });
    await operator('mutation { setMarketOffers(offers: [{id: "l40s-eu", gpuName: "L40S", gpuMemoryGb: 48, region: "eu-central", pricePerHour: 36, count: 2}]) { id } }');
    const created = await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 40, provider: "market", minReplicas: 2, maxReplicas: 2}) { deployment { id } } }`);
    const id = created.data.createDeployment.deployment.id;
    await test.waitForReplicas(id, 2);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await graphql(`mutation($id: ID!) { pauseDeployment(id: $id) { status } }`, { id });

    const replicas = (await deployment(id)).replicas;
    const billable = replicas.filter((replica: any) => replica.startedAt);
    expect(billable.length).toBeGreaterThanOrEqual(2);
    const [{ rows }] = [await test.server.controlPlane.dataSource.query(
      `SELECT r.id, extract(epoch FROM r.terminated_at - r.started_at) AS seconds, r.price_per_hour, coalesce(-sum(l.amount), 0) AS billed, count(l.id) AS periods
       FROM replicas r LEFT JOIN billing_ledger l ON l.replica_id = r.id AND l.kind = 'gpu_time' WHERE r.deployment_id = $1 AND r.started_at IS NOT NULL GROUP BY r.id`, [id],
    ).then((result: any[]) => ({ rows: result }))];
    let expected = 0;
    let billed = 0;
    for (const row of rows) {
      const lifetime = (Number(row.seconds) / 3600) * Number(row.price_per_hour);
      expect(Number(row.periods)).toBeGreaterThan(3); // metered every 100 ms, not once
      expect(Math.round(Number(row.billed) * 100)).toBe(Math.round(lifetime * 100));
      expected += lifetime;
      billed += Number(row.billed);
    }
    expect(Math.round(billed * 100)).toBe(Math.round(expected * 100));
    expect(billed).toBeGreaterThan(0.01); // $36/h × ≥ 1.5 s × 2 replicas ≈ 3 cents

    const range = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date(Date.now() + 60_000).toISOString() };
    for (const groupBy of ['day', 'deployment', 'replica']) {
      const costs = (await graphql('query($from: DateTimeISO!, $to: DateTimeISO!, $groupBy: String!) { costs(from: $from, to: $to, groupBy: $groupBy) { key gpuHours amount } }', { ...range, groupBy })).data.costs;
      // Every grouping sums, exactly, to the whole GPU time of the workspace's ledger (this deployment and the earlier cheap one).
      const [{ total, all }] = await test.server.controlPlane.dataSource.query(
        `SELECT (SELECT sum(amount::numeric) FROM unnest($2::text[]) AS amount) = -sum(amount) AS total, -sum(amount) AS all
         FROM billing_ledger WHERE workspace_id = $1 AND kind = 'gpu_time'`, [workspace.workspaceId, costs.map((row: any) => row.amount)]);
      expect({ groupBy, total, all: Number(all) > 0 }).toEqual({ groupBy, total: true, all: true });
    }
    // Credit is debited by everything billed since it was added: the balance is the sum of the
    // ledger (the top-up, the opening row that closed out the postpaid charges before it, and
    // every period since), to the last of its 10 decimal places.
    const balance = (await graphql('{ creditBalance }')).data.creditBalance;
    const [{ rows: ledgerSum, since }] = await test.server.controlPlane.dataSource.query(
      `SELECT sum(amount) AS rows, sum(amount) FILTER (WHERE kind = 'gpu_time' AND created_at > $2) AS since FROM billing_ledger WHERE workspace_id = $1`,
      [workspace.workspaceId, creditedAt]);
    expect(balance).toBe(canonicalMoney(ledgerSum));
    expect(Number(balance)).toBeCloseTo(100 + Number(since), 8);
    const [{ all }] = await test.server.controlPlane.dataSource.query('SELECT sum(amount) AS all FROM billing_ledger WHERE workspace_id = $1', [workspace.workspaceId]);

    // Paused: nothing more accrues.
    const before = Number(all);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const [{ after }] = await test.server.controlPlane.dataSource.query('SELECT sum(amount) AS after FROM billing_ledger WHERE workspace_id = $1', [workspace.workspaceId]);
    expect(Number(after)).toBe(before);
  });

  it('keeps operator operations to the operator token', async () => {
    const asWorkspace = await graphql('mutation { reclaimMarketOffer(id: "t4-us-west") }');
    expect(asWorkspace.errors?.[0].extensions.code).toBe('FORBIDDEN');
    const anonymous = await graphqlClient(test.url, 'nothing')('{ staticHosts { id } }');
    expect(anonymous.errors?.[0].extensions.code).toBe('UNAUTHENTICATED');
    expect((await operator('{ staticHosts { id } }')).errors).toBeUndefined();
  });

  it('refuses bad market changes naming the argument, and an unknown offer as not found', async () => {
    await operator('mutation { setMarketOffers(offers: [{id: "t4-us-west", gpuName: "T4", gpuMemoryGb: 16, region: "us-west", pricePerHour: 0.3, count: 1}]) { id } }');
    const cases: Array<[string, string, string]> = [
      ['mutation { setMarketOffers(offers: [{id: "x", gpuName: "T4", gpuMemoryGb: 16, region: "r", pricePerHour: 0, count: 1}]) { id } }', 'offers', 'BAD_USER_INPUT'],
      ['mutation { updateMarketOffer(id: "t4-us-west", pricePerHour: -1) { id } }', 'pricePerHour', 'BAD_USER_INPUT'],
      ['mutation { updateMarketOffer(id: "t4-us-west", count: -2) { id } }', 'count', 'BAD_USER_INPUT'],
      ['mutation { updateMarketOffer(id: "no-such-offer", count: 1) { id } }', 'id', 'NOT_FOUND'],
      ['mutation { reclaimMarketOffer(id: "no-such-offer") }', 'id', 'NOT_FOUND'],
    ];
    for (const [mutation, param, code] of cases) {
      const result = await operator(mutation);
      expect({ mutation, extensions: result.errors?.[0].extensions }).toMatchObject({ mutation, extensions: { code, param } });
    }
  });
});
