import OpenAI from 'openai';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { SHARED_ID, startSharingFixture, type SharingFixture } from './support/sharing-fixture';

/** A guest on a server that holds no shared replica is served by a peer's (relayed), billed the same, and refused when the peer is full. */
describe('shared serving across servers', () => {
  let fixture: SharingFixture;
  let serverB: TestServer;
  let databaseUrl: string;
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 2_000 };

  beforeAll(async () => {
    fixture = await startSharingFixture({ controlPlane: cluster });
    databaseUrl = fixture.test.databaseUrl;
    serverB = await startTestServer({ databaseUrl, controlPlane: { ...cluster, localAgents: false, sharing: { availabilityIntervalMs: 100, settleIntervalMs: 50, creditLeaseIdleMs: 300 } } });
  });

  afterAll(async () => {
    await serverB?.stop();
    await fixture?.test.stop({ keepDatabase: true });
    await dropTestDatabase(databaseUrl);
  });

  it('serves, bills and refuses a guest on a server without shared replicas through the peer that holds them', async () => {
    const owner = await fixture.workspace('owner');
    const guest = await fixture.workspace('guest', '1');
    const shared = await fixture.sharedDeployment(owner.apiKey);
    const client = new OpenAI({ baseURL: `${serverB.url}/shared/v1`, apiKey: guest.apiKey, maxRetries: 0 });
    await waitFor(async () => ((await client.models.retrieve(SHARED_ID)) as any).availability === 'Available', 5_000, 'B sees A\'s shared replica');

    const answer = await client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });
    expect(answer.usage!.completion_tokens).toBe(4);
    const query = (sql: string, parameters: unknown[]) => fixture.test.server.controlPlane.dataSource.query(sql, parameters);
    await waitFor(async () => (await query(`SELECT count(*)::int AS n FROM billing_ledger WHERE kind = 'owner_credit' AND deployment_id = $1`, [shared.id]))[0].n === 1, 5_000, 'settled');
    const [credit] = await query(`SELECT workspace_id, prompt_tokens, completion_tokens FROM billing_ledger WHERE kind = 'owner_credit' AND deployment_id = $1`, [shared.id]);
    expect(credit).toMatchObject({ workspace_id: owner.id, completion_tokens: 4 });

    // Fill A's 3 guest slots with slow guests sent to B; the next guest on B is refused at once.
    const controller = new AbortController();
    const slow = Array.from({ length: 3 }, () => client.chat.completions.create(
      { model: SHARED_ID, messages: [{ role: 'user', content: 'slow' }], max_tokens: 2, cpu_engine: { ttft_ms: 3_000 } } as any,
      { signal: controller.signal }).catch((error: unknown) => error));
    await waitFor(() => fixture.test.server.controlPlane.dispatcher.connections(shared.id)[0]?.guestInFlight === 3, 5_000, 'A\'s guest slots taken');
    await waitFor(async () => ((await client.models.retrieve(SHARED_ID)) as any).availability === 'Degraded', 5_000, 'B sees no idle slot');
    await expect(client.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }))
      .rejects.toMatchObject({ status: 429, code: 'shared_pool_busy' });
    controller.abort();
    await Promise.all(slow);
  });

  it('guest credit is known on every server: B refuses at 402 from memory what A\'s lease holds, and a top-up on A lets the guest in on B', async () => {
    const guest = await fixture.workspace('poor guest', '0.001');
    const onA = new OpenAI({ baseURL: `${fixture.test.url}/shared/v1`, apiKey: guest.apiKey, maxRetries: 0 });
    const onB = new OpenAI({ baseURL: `${serverB.url}/shared/v1`, apiKey: guest.apiKey, maxRetries: 0 });
    const small = { model: SHARED_ID, messages: [{ role: 'user' as const, content: 'hi' }], max_tokens: 2 };
    const creditOn = (server: TestServer) => server.server.controlPlane.guestCredit.describe(guest.id);
    await waitFor(async () => ((await onB.models.retrieve(SHARED_ID)) as any).availability === 'Available', 10_000, 'A\'s guest slots idle again');
    // B serves the guest once (so B knows it), then gives its idle lease back.
    await onB.chat.completions.create(small);
    await waitFor(() => creditOn(serverB)?.lease === '0', 5_000, 'B\'s idle lease given back');
    // A admits a request whose worst case (~4,100 bytes at 0.18 per 1M) needs most of what is left: A leases all of it.
    const slow = onA.chat.completions.create({ ...small, messages: [{ role: 'user', content: 'x'.repeat(4_000) }], cpu_engine: { ttft_ms: 2_000 } } as any);
    // B hears of A's lease over the cluster channel and refuses from memory, while A's request runs.
    await waitFor(() => creditOn(serverB)?.available === '0', 5_000, 'B hears of A\'s lease');
    await expect(onB.chat.completions.create(small)).rejects.toMatchObject({ status: 402, code: 'insufficient_quota' });
    expect((await slow).choices).toHaveLength(1);
    // A top-up through A: every server forgets what it knew of the guest's credit (the key cache's notification) and reads it again.
    const topUp = await fixture.graphql('mutation($id: ID!) { addCredit(workspaceId: $id, amount: "1") }', { id: guest.id });
    expect(topUp.errors).toBeUndefined();
    await waitFor(() => creditOn(serverB)?.available !== '0', 5_000, 'B forgets the old credit');
    expect((await onB.chat.completions.create(small)).choices).toHaveLength(1);
  });
});
