import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

interface Line { replicaId: string; seq: number; level: string; source: string; message: string }

const LINE_FIELDS = 'replicaId seq level source message';

/**
 * A replica's log: the lines its real agent process prints reach the server that spawned it
 * (and holds its stream), are kept scrubbed, and reach the deployment's subscribers and backlog
 * readers on another server through the cluster notifier. Other workspaces are refused.
 */
describe('replica logs across two servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string };

  beforeAll(async () => {
    serverA = await startTestServer();
    // B runs no agents: every line it has came from A.
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { localAgents: false } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  async function graphql(server: TestServer, apiKey: string, query: string, variables: Record<string, unknown>) {
    const response = await fetch(`${server.url}/graphql`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` }, body: JSON.stringify({ query, variables }),
    });
    return await response.json() as { data?: { replicaLogs: Line[] }; errors?: Array<{ message: string; extensions: { code: string; param?: string } }> };
  }

  const backlog = async (server: TestServer, apiKey = workspace.apiKey) => await graphql(server, apiKey,
    `query ($id: ID!) { replicaLogs(deploymentId: $id) { ${LINE_FIELDS} } }`, { id: deployment.id });

  function subscribe(server: TestServer, apiKey: string): { client: Client; lines: Line[]; errors: unknown[]; done: Promise<void> } {
    const client = createClient({ url: `${server.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
    const lines: Line[] = [];
    const errors: unknown[] = [];
    const done = new Promise<void>((resolve) => {
      client.subscribe<{ replicaLogLine: Line }>({ query: `subscription ($id: ID!) { replicaLogLine(deploymentId: $id) { ${LINE_FIELDS} } }`, variables: { id: deployment.id } }, {
        next: (event) => {
          if (event.data) lines.push(event.data.replicaLogLine);
          if (event.errors) errors.push(...event.errors);
        },
        error: (error) => {
          errors.push(error);
          resolve();
        },
        complete: resolve,
      });
    });
    return { client, lines, errors, done };
  }

  it('the agent\'s start-up lines are kept where it runs, scrubbed of its addresses, and mirrored on the other server', async () => {
    const started = await backlog(serverA);
    expect(started.errors).toBeUndefined();
    const lines = started.data!.replicaLogs;
    const starting = lines.find((line) => line.message.startsWith('worker agent starting'));
    expect(starting).toMatchObject({ source: 'agent', level: 'info' });
    expect(starting!.message).toContain('engine=cpu');
    expect(lines.some((line) => line.message.startsWith('welcomed by the control plane'))).toBe(true);
    // The control plane's gRPC address (the agent prints it) and the join token never show.
    const grpcPort = serverA.server.controlPlane.grpcAddress.split(':').pop()!;
    for (const line of lines) {
      expect(line.message).not.toContain(grpcPort);
      expect(line.message).not.toMatch(/127\.0\.0\.1|jt-|\/tmp\//);
    }
    // B was up before the agent started: it has the same lines.
    await waitFor(async () => (await backlog(serverB)).data?.replicaLogs.length === lines.length, 10_000, 'the lines mirrored on server B');
    expect((await backlog(serverB)).data!.replicaLogs.map((line) => line.message)).toEqual(lines.map((line) => line.message));
  });

  it('new lines stream to a subscriber on the other server as the agent prints them', async () => {
    const subscription = subscribe(serverB, workspace.apiKey);
    try {
      // Give the subscription its turn on the socket before the lines it should see are printed.
      await waitFor(() => serverB.server.gateway.subscriptions.size > 0, 10_000, 'the subscription open on server B');
      const [replica] = (await serverA.server.controlPlane.replicas.list(deployment.id)).filter((each) => each.status !== 'Terminated');
      // SIGTERM: the agent drains and says so, exits, and its provider starts it again as the same replica.
      serverA.server.controlPlane.localProvider!.processOf(replica.id)!.kill('SIGTERM');
      await waitFor(() => subscription.lines.some((line) => line.message.startsWith('draining')), 15_000, 'the drain line on server B');
      await waitFor(() => subscription.lines.some((line) => line.message.startsWith('worker agent starting')), 15_000, 'the restarted agent\'s first line');
      expect(subscription.errors).toEqual([]);
      expect(new Set(subscription.lines.map((line) => line.replicaId))).toEqual(new Set([replica.id]));
      const seqs = subscription.lines.map((line) => line.seq);
      expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    } finally {
      await subscription.client.dispose();
    }
  });

  it('another workspace\'s key is refused the backlog and the stream (FORBIDDEN), on either server', async () => {
    const other = await serverA.createWorkspace();
    for (const server of [serverA, serverB]) {
      const refused = await backlog(server, other.apiKey);
      expect(refused.data).toBeNull();
      expect(refused.errors![0].extensions.code).toBe('FORBIDDEN');
      const subscription = subscribe(server, other.apiKey);
      await subscription.done;
      await subscription.client.dispose();
      expect(JSON.stringify(subscription.errors)).toContain('FORBIDDEN');
      expect(subscription.lines).toEqual([]);
    }
  });

  it('a limit outside 1 to 500 is BAD_USER_INPUT naming limit, and nothing is read', async () => {
    for (const limit of [0, 501, -3]) {
      const answer = await graphql(serverB, workspace.apiKey,
        `query ($id: ID!, $limit: Int!) { replicaLogs(deploymentId: $id, limit: $limit) { ${LINE_FIELDS} } }`, { id: deployment.id, limit });
      expect(answer.data?.replicaLogs ?? null).toBeNull();
      expect(answer.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT', param: 'limit' } });
      expect(answer.errors?.[0].message).toMatch(/limit must be an integer from 1 to 500/);
    }
  });
});
