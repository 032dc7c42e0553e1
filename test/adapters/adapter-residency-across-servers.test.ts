import OpenAI, { toFile } from 'openai';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlAs } from '../security/support/security-client';
import { loraGguf } from './support/lora-files';

interface Row { replicaId: string; deploymentId: string; serverId: string; revision: number; state: string; loadMs: number | null; error: string | null }

/**
 * `Adapter.residency` answered by a server that holds no agent: the replica of the peer that
 * holds it is listed from that peer's registry row (state, revision; no load time), as the
 * peer itself lists it from its agent's heartbeat (with its load time).
 */
describe('adapter residency across servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let databaseUrl: string;
  let workspace: TestWorkspace;
  let deployment: TestDeployment;
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 2_000 };

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: cluster });
    databaseUrl = serverA.databaseUrl;
    serverB = await startTestServer({ databaseUrl, dataDir: serverA.dataDir, controlPlane: { ...cluster, localAgents: false } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
  }, 60_000);

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop({ keepDatabase: true });
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  it('B lists the replica on A holding the adapter, with A as its server and no load time; A lists it with its load time', async () => {
    const client = new OpenAI({ apiKey: workspace.apiKey, baseURL: deployment.baseUrl, maxRetries: 0 });
    const baseModel = serverA.server.controlPlane.catalog.defaultChatModel().id;
    const asA = graphqlAs(serverA.url, workspace.apiKey);
    const asB = graphqlAs(serverB.url, workspace.apiKey);
    const file = await client.files.create({ file: await toFile(loraGguf(), 'a.gguf'), purpose: 'user_data' });
    const created = await asA('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name: 'resident', baseModel, fileId: file.id } });
    expect(created.body.errors).toBeUndefined();
    const adapterId = created.body.data!.createAdapter.id as string;
    expect((await asA('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapterId, d: deployment.id })).body.errors).toBeUndefined();
    const residency = async (as: typeof asA): Promise<Row[]> => {
      const answer = await as('query($id: ID!) { adapter(id: $id) { residency { replicaId deploymentId serverId revision state loadMs error } } }', { id: adapterId });
      expect(answer.body.errors).toBeUndefined();
      return answer.body.data!.adapter.residency;
    };
    expect(await residency(asB)).toEqual([]);

    expect((await client.chat.completions.create({ model: 'resident', messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 })).model).toBe('resident');
    const replicaId = serverA.server.controlPlane.dispatcher.connections(deployment.id)[0].replicaId;
    const serverId = serverA.server.controlPlane.notifier.instanceId;
    await waitFor(async () => (await residency(asA)).some((row) => row.state === 'GPU'), 5_000, 'A to see the adapter loaded');
    const [onA] = await residency(asA);
    expect(onA).toMatchObject({ replicaId, deploymentId: deployment.id, serverId, revision: 1, state: 'GPU', error: null });
    expect(onA.loadMs).toBeGreaterThanOrEqual(0);
    // A's row is at most a registry heartbeat old: it may still say LOADING first.
    await waitFor(async () => (await residency(asB)).some((row) => row.state === 'GPU'), 5_000, 'B to read A\'s row');
    expect(await residency(asB)).toEqual([{ replicaId, deploymentId: deployment.id, serverId, revision: 1, state: 'GPU', loadMs: null, error: null }]);
  });
});
