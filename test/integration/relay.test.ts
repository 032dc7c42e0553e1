import OpenAI from 'openai';
import { overWebSocket } from '../support/graphql-websocket';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

/**
 * Any server serves any request: server B holds no agent, so its chat requests are relayed to
 * server A, which holds the deployment's replicas (cluster.v1 RelayService).
 */
const WINDOW = 64 * 1024;

describe('relay between servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  // A stopping server deletes its row, so nothing here waits on the timeout: the default-like 5 s
  // keeps a heartbeat that commits late on a loaded machine from dropping A from B's peers.
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 5_000 };
  let databaseUrl: string;

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: { ...cluster, localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });
    databaseUrl = serverA.databaseUrl;
    // B's window is the smallest allowed, so a modest stream needs many credits to cross the relay.
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { ...cluster, localAgents: false }, gateway: { streamBufferBytes: WINDOW } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
    // B learns of A's replicas from A's next registry heartbeat.
    await waitFor(() => serverB.server.controlPlane.registry.peers().some((peer) => peer.load[deployment.id]?.ready === 1), 5_000, 'B sees A\'s replica');
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop({ keepDatabase: true });
    await dropTestDatabase(databaseUrl);
  });

  const clientOf = (server: TestServer) => new OpenAI({ baseURL: `${server.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
  const usageRows = () => serverA.server.controlPlane.dataSource.query(
    `SELECT status, replica_id, completion_tokens FROM usage_records WHERE deployment_id = $1 ORDER BY id`, [deployment.id]);

  it('answers plain and streamed chats on a server without agents, metered with the replica that ran them', async () => {
    expect(serverB.server.controlPlane.dispatcher.connections()).toHaveLength(0);
    const client = clientOf(serverB);
    const plain = await client.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4 });
    expect(plain.usage!.completion_tokens).toBe(4);
    const stream = await client.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 6, stream: true, stream_options: { include_usage: true } });
    let chunks = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(6);
    expect(usage!.completion_tokens).toBe(6);
    const [replica] = await serverA.server.controlPlane.replicas.listActive(deployment.id);
    await waitFor(async () => (await usageRows()).length === 2, 5_000, 'usage recorded');
    expect(await usageRows()).toEqual([
      { status: 'succeeded', replica_id: replica.id, completion_tokens: 4 },
      { status: 'succeeded', replica_id: replica.id, completion_tokens: 6 },
    ]);
  });

  it('passes an engine\'s 400 through and cancels on the agent when the client leaves, metering what was produced', async () => {
    const client = clientOf(serverB);
    await expect(client.chat.completions.create({ messages: [{ role: 'user', content: 'x' }], max_tokens: 4, temperature: 7 }))
      .rejects.toMatchObject({ status: 400, param: 'temperature' });
    const controller = new AbortController();
    const stream = await client.chat.completions.create({
      messages: [{ role: 'user', content: 'slow' }], max_tokens: 200, stream: true, cpu_engine: { tokens_per_second: 20 },
    } as any, { signal: controller.signal });
    let received = 0;
    for await (const chunk of stream) {
      if (chunk.choices[0]?.delta?.content) received++;
      if (received === 3) {
        controller.abort();
        break;
      }
    }
    await waitFor(async () => (await usageRows()).some((row: any) => row.status === 'canceled'), 5_000, 'the canceled stream metered');
    const canceled = (await usageRows()).find((row: any) => row.status === 'canceled');
    expect(canceled.completion_tokens).toBeGreaterThanOrEqual(3);
    expect(canceled.completion_tokens).toBeLessThan(200);
    // The agent is free again: its job was canceled, not left running.
    await waitFor(() => serverA.server.controlPlane.dispatcher.connections(deployment.id)[0].inFlight === 0, 3_000, 'the agent idle');
  });

  it('runs a stream many windows long to the end: the client\'s credit crosses the relay to the agent', async () => {
    const stream = await clientOf(serverB).chat.completions.create({
      messages: [{ role: 'user', content: 'a long one' }], n: 8, max_tokens: 2_000, stream: true, stream_options: { include_usage: true },
    });
    let contentChunks = 0;
    let bytes = 0;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      bytes += JSON.stringify(chunk).length;
      if (chunk.choices[0]?.delta?.content) contentChunks++;
      if (chunk.usage) usage = chunk.usage;
    }
    // Without credit the agent would have stopped after one window (64 KiB).
    expect(bytes).toBeGreaterThan(20 * WINDOW);
    expect(contentChunks).toBe(8 * 2_000);
    expect(usage!.completion_tokens).toBe(8 * 2_000);
  });

  it('answers 503 when no server holds a ready replica, and a relayed stream fails cleanly when the holding server goes', async () => {
    const other = await serverB.createDeployment(workspace, { modelId: 'Qwen/Qwen2.5-7B' });
    const none = await fetch(`${serverB.url}/d/${other.slug}/v1/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x', max_tokens: 1 }),
    });
    expect(none.status).toBe(503);
    expect(((await none.json()) as any).error.code).toBe('no_replica_available');

    const stream = await clientOf(serverB).chat.completions.create({
      messages: [{ role: 'user', content: 'slow' }], max_tokens: 400, stream: true, cpu_engine: { tokens_per_second: 20 },
    } as any);
    let text = '';
    const read = (async () => {
      for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? '';
    })().then(() => null, (error: Error) => error);
    await waitFor(() => text.length > 0, 5_000, 'the stream started');
    // A graceful stop lets the job run out the agents' drain timeout (3 s here), then fails it.
    const stoppedAt = Date.now();
    await serverA.stop({ keepDatabase: true });
    serverA = undefined as unknown as TestServer;
    const failure = await read;
    expect(failure?.message).toMatch(/drain timeout/);
    // Cut at the drain timeout, short of the stream's own 20 s.
    expect(Date.now() - stoppedAt).toBeLessThan(15_000);
    // The stopped server's row is gone: B relays nothing to it and answers 503 at once.
    await waitFor(() => serverB.server.controlPlane.registry.peers().length === 0, 10_000, 'A gone from B\'s peers');
    const after = await fetch(`${serverB.url}/d/${deployment.slug}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 1 }),
    });
    expect(after.status).toBe(503);
  });
});
