import { graphqlClient, OPERATOR_TOKEN } from '../capacity/support/graphql-client';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { GraphQLSocket } from './support/graphql-socket';

/**
 * A graphql-ws connection is authenticated when it opens, but its key must hold for as long as
 * it stays open: a revoked or regenerated key, or a deleted workspace, closes the socket (4403)
 * at once on every server, ending its subscriptions, as HTTP calls with the key stop at once.
 * Two servers on one database with key caches far longer than the test: what B does can only
 * come from the cluster notification.
 */
/**
 * Within 1 s on an idle machine (this file's bound until a loaded CI run starved it); the bound
 * is only there to tell the notification from the 600 s key cache, so it leaves room for load.
 */
const CLOSE_BOUND_MS = 10_000;
describe('revocation reaches open WebSockets on every server', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string };
  const sockets: GraphQLSocket[] = [];

  const newKey = async (owner = workspace) => {
    const { apiKey, plaintext } = await serverA.server.controlPlane.apiKeys.create(owner.workspaceId, 'socket key');
    return { id: apiKey.id, plaintext };
  };
  const open = async (server: TestServer, key: string) => {
    const socket = await GraphQLSocket.open(server.url, `Bearer ${key}`);
    sockets.push(socket);
    return socket;
  };
  /** Resolves with the close, or fails the test when none came within `ms`. */
  const closedWithin = async (socket: GraphQLSocket, ms: number) => {
    const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`socket still open ${ms} ms after the change`)), ms).unref());
    return await Promise.race([socket.closed, timeout]);
  };

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: { apiKeyCacheTtlMs: 600_000, operatorToken: OPERATOR_TOKEN } });
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { apiKeyCacheTtlMs: 600_000, localAgents: false, operatorToken: OPERATOR_TOKEN } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace);
    await serverA.waitForReplicas(deployment.id, 1);
  });

  afterAll(async () => {
    for (const socket of sockets) socket.terminate();
    await serverB?.stop();
    await serverA?.stop();
  });

  it.each([
    ['revoked on server A, socket on server B', () => serverA],
    ['revoked on the socket\'s own server', () => serverB],
  ])('a key %s: the socket is closed with 4403 at once (by notification, not the key cache) and its subscription delivers nothing more', async (_label, revokingServer) => {
    const key = await newKey();
    const socket = await open(serverB, key.plaintext);
    expect(await socket.run('{ apiKeys { id } }')).toMatchObject({ data: { apiKeys: expect.any(Array) } });
    const updates = socket.start('subscription { deploymentUpdated { id status } }');
    // A subscription is live once it delivers: pause the deployment until an event arrives.
    await serverA.server.controlPlane.deployments.pause(workspace.workspaceId, deployment.id);
    await waitFor(() => updates.results.length > 0, 5_000, 'a deploymentUpdated event before the revocation');
    await serverA.server.controlPlane.deployments.resume(workspace.workspaceId, deployment.id);

    const revoked = await graphqlClient(revokingServer().url, workspace.apiKey)('mutation ($id: ID!) { revokeApiKey(id: $id) { id } }', { id: key.id });
    expect(revoked.errors).toBeUndefined();
    const revokedAt = Date.now();
    const close = await closedWithin(socket, CLOSE_BOUND_MS);
    expect(close.code).toBe(4403);
    expect(close.at - revokedAt).toBeLessThan(CLOSE_BOUND_MS);

    const delivered = updates.results.length;
    await serverA.server.controlPlane.deployments.pause(workspace.workspaceId, deployment.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    await serverA.server.controlPlane.deployments.resume(workspace.workspaceId, deployment.id);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(updates.results.length).toBe(delivered);
    // The same key is refused when a socket tries to open with it again.
    await expect(GraphQLSocket.open(serverB.url, `Bearer ${key.plaintext}`)).rejects.toThrow(/4403/);
  });

  it('a regenerated key: the socket signed in with the old plaintext is closed; the new plaintext opens one', async () => {
    const key = await newKey();
    const socket = await open(serverB, key.plaintext);
    expect(await socket.run('{ webhookSigningSecret { secret } }')).toMatchObject({ data: { webhookSigningSecret: { secret: expect.any(String) } } });
    const regenerated = await graphqlClient(serverA.url, workspace.apiKey)('mutation ($id: ID!) { regenerateApiKey(id: $id) { plaintext } }', { id: key.id });
    const changedAt = Date.now();
    const close = await closedWithin(socket, CLOSE_BOUND_MS);
    expect(close.code).toBe(4403);
    expect(close.at - changedAt).toBeLessThan(CLOSE_BOUND_MS);
    const renewed = await open(serverB, regenerated.data.regenerateApiKey.plaintext);
    expect(await renewed.run('{ apiKeys { id } }')).toMatchObject({ data: { apiKeys: expect.any(Array) } });
  });

  it('a deleted workspace: its sockets are closed and cannot create a deployment or mint a key', async () => {
    const operator = graphqlClient(serverA.url, OPERATOR_TOKEN);
    const created = await operator('mutation { createWorkspace(name: "doomed") { workspace { id } plaintext } }');
    const doomed = created.data.createWorkspace as { workspace: { id: string }; plaintext: string };
    const socket = await open(serverB, doomed.plaintext);
    expect(await socket.run('{ deployments { id } }')).toMatchObject({ data: { deployments: [] } });

    expect((await operator('mutation ($id: ID!) { deleteWorkspace(id: $id) { id } }', { id: doomed.workspace.id })).errors).toBeUndefined();
    const deletedAt = Date.now();
    const close = await closedWithin(socket, CLOSE_BOUND_MS);
    expect(close.code).toBe(4403);
    expect(close.at - deletedAt).toBeLessThan(CLOSE_BOUND_MS);
    expect(await socket.run('mutation { createApiKey(input: { name: "after" }) { plaintext } }')).toBeNull();
    const keys = await serverA.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM api_keys WHERE workspace_id = $1 AND revoked_at IS NULL', [doomed.workspace.id]);
    expect(keys[0].count).toBe(0);
  });

  it('a change that leaves the key valid (its limits) keeps the socket open and working', async () => {
    const key = await newKey();
    const socket = await open(serverB, key.plaintext);
    const changed = await graphqlClient(serverA.url, workspace.apiKey)('mutation ($id: ID!) { setApiKeyLimits(id: $id, limits: { rpmLimit: 7 }) { rpmLimit } }', { id: key.id });
    expect(changed.data.setApiKeyLimits.rpmLimit).toBe(7);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(socket.close).toBeNull();
    const listed = await socket.run('{ apiKeys { id rpmLimit } }') as { data: { apiKeys: Array<{ id: string; rpmLimit: number }> } };
    expect(listed.data.apiKeys.find((item) => item.id === key.id)?.rpmLimit).toBe(7);
  });
});
