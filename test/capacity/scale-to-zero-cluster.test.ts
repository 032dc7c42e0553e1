import OpenAI from 'openai';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { graphqlClient } from './support/graphql-client';

/**
 * Scale to zero across two servers on one database: server B holds no agent, so a request it
 * takes for a deployment at zero waits there, server A (whose local provider places the
 * replica) sees it waiting through B's load and starts one, and B's request is released when
 * A's next heartbeat reports the replica, then relayed to it. And the other way round: a request
 * B relays on its view of A a heartbeat old, after A's replica stopped, waits at A for a new one.
 */
describe('scale to zero across servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let databaseUrl: string;
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 2_000, capacityIntervalMs: 100 };

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: { ...cluster, localAgentEnv: { WORKER_CPU_LOAD_MS: '1500' } } });
    databaseUrl = serverA.databaseUrl;
    serverB = await startTestServer({ databaseUrl, controlPlane: { ...cluster, localAgents: false } });
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop({ keepDatabase: true });
    await dropTestDatabase(databaseUrl);
  });

  it('a request waiting at a server without agents is counted on every server, starts a replica on another, and is answered through the relay', async () => {
    const workspace = await serverA.createWorkspace();
    const deployment = await serverA.createDeployment(workspace, { minReplicas: 1, maxReplicas: 1, autoscale: true });
    await serverA.waitForReplicas(deployment.id, 1);
    // B must have read the replica in A's load first: B sees none left below only then means a
    // heartbeat written after the replica drained (B's view may lag A's by a heartbeat or two).
    await waitFor(() => serverB.server.controlPlane.jobs.hasReplica(deployment.id), 5_000, 'B sees the replica on A');
    await serverA.server.controlPlane.deploymentStore.update(deployment.id, { scaleToZeroAfterSeconds: 1 }, ['Creating', 'Running']);
    await waitFor(async () => (await serverA.server.controlPlane.replicas.listActive(deployment.id)).length === 0, 20_000, 'a scale to zero');
    await waitFor(() => !serverB.server.controlPlane.jobs.hasReplica(deployment.id), 5_000, 'B sees no replica left');

    const client = new OpenAI({ baseURL: `${serverB.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
    const answer = client.chat.completions.create({ messages: [{ role: 'user', content: 'hello from the other server' }], max_tokens: 4 });
    await waitFor(() => serverB.server.controlPlane.coldStarts.waiting(deployment.id) === 1, 10_000, 'the request waiting at B');
    // A holds nothing of it, yet GraphQL on A counts it: every server's waiting is published with its load.
    const graphql = graphqlClient(serverA.url, workspace.apiKey);
    await waitFor(async () => (await graphql('query($id: ID!) { deployment(id: $id) { waitingForReplica } }', { id: deployment.id })).data.deployment.waitingForReplica === 1,
      5_000, 'A counting the request waiting at B');
    expect(serverA.server.controlPlane.coldStarts.waiting(deployment.id)).toBe(0);

    const completion = await answer;
    expect(completion.choices[0].message.content?.length).toBeGreaterThan(0);
    expect(serverB.server.controlPlane.dispatcher.connections(deployment.id)).toHaveLength(0);
    const [cold] = await serverA.server.controlPlane.capacityLoop.recordedDecisions(deployment.id, 200)
      .then((rows) => rows.filter((row) => row.reason === 'cold_start'));
    expect(cold).toMatchObject({ currentReplicas: 0, desiredReplicas: 1 });
    expect(cold).toMatchObject({ movedBy: 'waiting' });
    expect(cold.inputs).toMatchObject({ waitingForReplica: 1 });
    // B admitted and settled it: one record, written by B's recorder.
    await serverB.server.controlPlane.usage.flush();
    expect(await serverA.server.controlPlane.dataSource.query('SELECT status FROM usage_records WHERE deployment_id = $1', [deployment.id])).toEqual([{ status: 'succeeded' }]);
  });

  it('a request B relays on a view of A a heartbeat old, just after A\'s last replica stopped, waits at A for the cold start instead of a 503', async () => {
    const workspace = await serverA.createWorkspace();
    const deployment = await serverA.createDeployment(workspace, { minReplicas: 1, maxReplicas: 1, autoscale: true });
    await serverA.waitForReplicas(deployment.id, 1);
    await waitFor(() => serverB.server.controlPlane.jobs.hasReplica(deployment.id), 5_000, 'B sees the replica on A');
    // B's view of A is pinned as it is now, replica ready: what B holds for up to a heartbeat
    // after A's replica stops (the window is timing-dependent; here it is held open).
    const registryB = serverB.server.controlPlane.registry;
    const pinned = jest.spyOn(registryB, 'peers').mockReturnValue(registryB.peers());
    try {
      await serverA.server.controlPlane.deploymentStore.update(deployment.id, { scaleToZeroAfterSeconds: 1 }, ['Creating', 'Running']);
      // Its row ends before its agent's stream is drained: wait for both.
      await waitFor(async () => (await serverA.server.controlPlane.replicas.listActive(deployment.id)).length === 0
        && serverA.server.controlPlane.dispatcher.connections(deployment.id).every((connection) => connection.draining || connection.closed), 20_000, 'a scale to zero');
      expect(serverB.server.controlPlane.jobs.hasReplica(deployment.id)).toBe(true);

      const client = new OpenAI({ baseURL: `${serverB.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
      const answer = client.chat.completions.create({ messages: [{ role: 'user', content: 'relayed to a server with no replica' }], max_tokens: 4 });
      await waitFor(() => serverA.server.controlPlane.coldStarts.waiting(deployment.id) === 1, 10_000, 'the relayed request waiting at A');
      expect(serverB.server.controlPlane.coldStarts.waiting(deployment.id)).toBe(0);
      pinned.mockRestore();

      const completion = await answer;
      expect(completion.choices[0].message.content?.length).toBeGreaterThan(0);
      expect(serverA.server.controlPlane.coldStarts.waiting(deployment.id)).toBe(0);
      await serverB.server.controlPlane.usage.flush();
      expect(await serverA.server.controlPlane.dataSource.query('SELECT status FROM usage_records WHERE deployment_id = $1', [deployment.id])).toEqual([{ status: 'succeeded' }]);
    } finally {
      pinned.mockRestore();
    }
  });
});
