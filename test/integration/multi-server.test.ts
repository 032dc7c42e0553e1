import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { describeWithRedis, TEST_REDIS_URL, testRedisPrefix } from '../support/test-redis';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { chatOnce, userChat } from '../support/chat';

/**
 * A request B admitted: B holds no replica, so it answers 503 until its registry has A's load
 * (A's next cluster heartbeat, every second) and 200 after, relaying the job to A's replica.
 * Which one depends on how long the test took to get there, not on admission; a refused key is
 * 401 and a request over the limit 429 either way.
 */
const ADMITTED_ON_B = [200, 503];

/**
 * Two server processes' worth of state (two gateways + control planes) on one database, as
 * behind a load balancer: changes made through one are seen by the other at once, not after
 * a cache TTL. Server B runs no agents (local agents belong to the server that placed them).
 */
describe('several servers on one database', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };

  const statusOf = async (server: TestServer, apiKey: string) => (await chatOnce(`${server.url}/d/${deployment.slug}/v1`, apiKey, userChat('hello', { max_tokens: 2 }))).status;

  beforeAll(async () => {
    // Caches far longer than the test: a change seen on B can only have come by notification.
    serverA = await startTestServer({ controlPlane: { apiKeyCacheTtlMs: 600_000 } });
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { apiKeyCacheTtlMs: 600_000, localAgents: false } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  it('a key regenerated on one server stops working on the other at once, though B had it cached', async () => {
    const { plaintext } = await serverA.server.controlPlane.apiKeys.create(workspace.workspaceId, 'rotating');
    expect(ADMITTED_ON_B).toContain(await statusOf(serverB, plaintext)); // authenticated (and cached)
    const keyId = (await serverA.server.controlPlane.apiKeys.list(workspace.workspaceId)).find((key) => key.name === 'rotating')!.id;
    const regenerated = await serverA.server.controlPlane.apiKeys.regenerate(workspace.workspaceId, keyId);
    const changedAt = Date.now();
    // A notification takes milliseconds; the bound only has to be far below the caches' 600 s, and
    // leaves a loaded 2-core machine (load 6.5 once made 1 s too short) room.
    await waitFor(async () => (await statusOf(serverB, plaintext)) === 401, 10_000, 'the old key refused on server B');
    expect(Date.now() - changedAt).toBeLessThan(10_000);
    expect(ADMITTED_ON_B).toContain(await statusOf(serverB, regenerated.plaintext));
    expect(await statusOf(serverA, regenerated.plaintext)).toBe(200);
  });

  it('a deployment paused on one server answers 503 paused on the other and reaches its subscribers', async () => {
    const other = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(other.id, 1);
    const heldBefore = serverB.server.gateway.subscriptions.size;
    const client = createClient({ url: `${serverB.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
    const seen: string[] = [];
    const subscription = client.iterate<{ deploymentUpdated: { id: string; status: string } }>({ query: 'subscription { deploymentUpdated { id status } }' });
    const collecting = (async () => {
      for await (const event of subscription) if (event.data?.deploymentUpdated.id === other.id) seen.push(event.data.deploymentUpdated.status);
    })().catch(() => {});
    try {
      const before = await fetch(`${serverB.url}/d/${other.slug}/v1/models`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
      expect(before.status).toBe(200); // B has the deployment in its slug cache now
      // Live once B's hub holds it (a fixed sleep could end before the subscribe arrived on a loaded machine).
      await waitFor(() => serverB.server.gateway.subscriptions.size > heldBefore, 10_000, 'the subscription held on B');
      await serverA.server.controlPlane.deployments.pause(workspace.workspaceId, other.id);
      await waitFor(() => seen.includes('Paused'), 10_000, 'the Paused event on server B\'s subscription');
      const response = await fetch(`${serverB.url}/d/${other.slug}/v1/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }] }),
      });
      expect(response.status).toBe(503);
      expect((await response.json()).error.code).toBe('deployment_paused');
    } finally {
      await subscription.return?.();
      await client.dispose();
      await collecting;
    }
  });
});

describeWithRedis('several servers sharing rate limits through Redis', () => {
  let serverA: TestServer;
  let serverB: TestServer;

  beforeAll(async () => {
    const shared = { redisUrl: TEST_REDIS_URL, redisKeyPrefix: testRedisPrefix() };
    serverA = await startTestServer({ controlPlane: shared });
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { ...shared, localAgents: false } });
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  it('admits exactly RPM requests in total, wherever they land', async () => {
    const workspace = await serverA.createWorkspace({ rpmLimit: 4 });
    const deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
    const call = async (server: TestServer) => {
      const { status, headers } = await chatOnce(`${server.url}/d/${deployment.slug}/v1`, workspace.apiKey, userChat('hello', { max_tokens: 2 }));
      return { status, remaining: headers.get('x-ratelimit-remaining') };
    };
    const results = [await call(serverA), await call(serverB), await call(serverA), await call(serverB), await call(serverA), await call(serverB)];
    const statuses = results.map((result) => result.status);
    expect([statuses[0], statuses[2], statuses[4], statuses[5]]).toEqual([200, 200, 429, 429]);
    expect(ADMITTED_ON_B).toContain(statuses[1]);
    expect(ADMITTED_ON_B).toContain(statuses[3]);
    expect(results[0].remaining).toBe('3');
    expect(results[2].remaining).toBe('1');
  });
});

describe('start-up with an unreachable REDIS_URL', () => {
  it('fails with a message naming the variable and leaves nothing running', async () => {
    const started = Date.now();
    await expect(startTestServer({ controlPlane: { redisUrl: 'redis://:secret@127.0.0.1:1' } }))
      .rejects.toThrow(/REDIS_URL: cannot connect to Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
