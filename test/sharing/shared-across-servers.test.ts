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
    serverB = await startTestServer({ databaseUrl, controlPlane: { ...cluster, localAgents: false, sharing: { availabilityIntervalMs: 100 } } });
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
});
