import { startTestServer, startWithDeployment, waitFor, type TestServer } from '../support/test-server';

/** Replicas of the local provider show why their agent cannot start, instead of hanging in Creating. */
describe('local provider', () => {
  let test: TestServer;

  afterEach(async () => {
    await test?.stop();
  });

  it('records an agent that exits at start-up on its replica, with the agent\'s own message, and replaces it as a start failure', async () => {
    // `openai` engine without an engine URL: the agent refuses its configuration and exits 2.
    test = await startTestServer({ controlPlane: { localEngine: 'openai', localEngineUrl: undefined } });
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace);
    await waitFor(async () => (await test.server.controlPlane.replicas.list(deployment.id))[0]?.status === 'Terminated', 20_000, 'the replica to be replaced');
    const [replica] = await test.server.controlPlane.replicas.list(deployment.id);
    expect(replica.startFailure).toBe('exited');
    expect(replica.statusReason).toMatch(/^its agent exited before its engine was ready: agent exited with code 2: .*WORKER_ENGINE_URL.*; replaced$/);
  });

  it('starts min replicas as separate agent processes and spreads load across them', async () => {
    const { test: started, workspace, deployment } = await startWithDeployment({ deployment: { minReplicas: 2, maxReplicas: 2 } });
    test = started;
    const replicas = await test.server.controlPlane.replicas.list(deployment.id);
    expect(replicas.map((replica) => replica.status)).toEqual(['Running', 'Running']);
    const pids = replicas.map((replica) => test.server.controlPlane.localProvider!.processOf(replica.id)!.pid);
    expect(new Set(pids).size).toBe(2);
    await Promise.all(Array.from({ length: 16 }, async () => {
      const response = await fetch(`${deployment.baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'spread' }], max_tokens: 2 }),
      });
      expect(response.status).toBe(200);
    }));
    await waitFor(async () => (await test.server.controlPlane.usage.list(workspace.workspaceId)).length === 16, 5_000, 'usage records');
    const byReplica = new Set((await test.server.controlPlane.usage.list(workspace.workspaceId)).map((record) => record.replicaId));
    expect(byReplica.size).toBe(2);
  });
});
