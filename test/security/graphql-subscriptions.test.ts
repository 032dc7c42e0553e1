/**
 * graphql-ws sockets and subscriptions draw from the tenant budget (issue 33: one key held
 * 200,000 subscriptions, and each heartbeat went through every one of them). A socket holds
 * `sockets` from its accepted connection_init until it closes, a subscription holds
 * `subscriptions` (per socket, key, workspace and server) until it ends by whatever path; and
 * an event is rendered once per distinct operation among its own deployment's subscribers, the
 * same bytes going to each.
 */
import type { ReplicaLoad } from '../../control-plane/events/control-plane-events';
import type { BudgetHolder } from '../../control-plane/budgets/tenant-budget';
import type { ControlPlaneOverrides } from '../../control-plane/full-config';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { GraphQLSocket } from './support/graphql-socket';
import { sleep } from './support/security-client';

const REPLICA_LOAD = 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { deploymentId replicaId inFlight queued engineHealth } }';
const DEPLOYMENT_UPDATED = 'subscription { deploymentUpdated { id status } }';

type Answer = { errors?: Array<{ message: string; extensions: { code: string } }>; data?: any };
type Operation = ReturnType<GraphQLSocket['start']>;

/** An operation's refusal: graphql-ws's `error` message (refused before it was parsed: a list of errors) or a result's first error. */
const refusal = (operation: Operation) => {
  const first = operation.results[0] as Answer | Answer['errors'] | undefined;
  return Array.isArray(first) ? first[0] : first?.errors?.[0];
};

function replicaLoad(deploymentId: string, workspaceId: string, inFlight: number): ReplicaLoad {
  return {
    replicaId: 'rep_render_once', deploymentId, workspaceId, inFlight, queued: 2, engineHealth: 'ok', at: new Date(), firstOutputMs: null,
    completionMs: null, completed: 0, engineRunning: null, engineWaiting: null, kvCacheUsage: null, prefixCacheHitRate: null,
  };
}

/** A server, two workspaces with a deployment each (external: no agent), and sockets closed after each test. */
function suite(budgets: ControlPlaneOverrides['budgets']) {
  const context = {
    test: null as unknown as TestServer,
    alice: null as unknown as TestWorkspace,
    bob: null as unknown as TestWorkspace,
    aliceDeployment: null as unknown as { id: string },
    bobDeployment: null as unknown as { id: string },
    sockets: [] as GraphQLSocket[],
    held(name: 'sockets' | 'subscriptions', scope: 'key' | 'workspace' | 'server', holder: BudgetHolder = {}) {
      return context.test.server.controlPlane.budget.used(name, scope, holder);
    },
    async open(workspace: TestWorkspace, key = workspace.apiKey) {
      const socket = await GraphQLSocket.open(context.test.url, `Bearer ${key}`);
      context.sockets.push(socket);
      return socket;
    },
    /** Starts a subscription and waits until the server holds it, or refused it (its error result). */
    async subscribe(socket: GraphQLSocket, workspace: TestWorkspace, query = DEPLOYMENT_UPDATED, variables?: Record<string, unknown>) {
      const holds = () => context.held('subscriptions', 'workspace', { workspaceId: workspace.workspaceId });
      const before = holds();
      const operation = socket.start(query, variables);
      await waitFor(() => operation.results.length > 0 || holds() > before, 5_000, 'the subscription to start or be refused');
      return operation;
    },
  };
  beforeAll(async () => {
    context.test = await startTestServer({ controlPlane: { budgets } });
    context.alice = await context.test.createWorkspace();
    context.bob = await context.test.createWorkspace();
    context.aliceDeployment = await context.test.createDeployment(context.alice, { provider: 'external' });
    context.bobDeployment = await context.test.createDeployment(context.bob, { provider: 'external' });
  });
  afterEach(async () => {
    for (const socket of context.sockets.splice(0)) socket.terminate();
  });
  afterAll(async () => {
    await context.test?.stop();
  });
  return context;
}

describe('graphql-ws sockets and subscriptions hold the tenant budget', () => {
  const s = suite({ subscriptions: { socket: 3, key: 5, workspace: 100, server: 7 }, sockets: { key: 3, workspace: 20, server: 5 } });
  afterEach(async () => {
    await waitFor(() => s.held('sockets', 'server') === 0 && s.held('subscriptions', 'server') === 0, 5_000, 'every hold given back');
  });

  it('a subscription over its socket\'s, key\'s or server\'s share is refused naming the budget, and the socket stays open', async () => {
    const first = await s.open(s.alice);
    const kept = [await s.subscribe(first, s.alice), await s.subscribe(first, s.alice), await s.subscribe(first, s.alice)];
    expect(kept.map(refusal)).toEqual([undefined, undefined, undefined]);
    const perSocket = refusal(await s.subscribe(first, s.alice));
    expect(perSocket?.extensions.code).toBe('RATE_LIMITED');
    expect(perSocket?.message).toMatch(/budget 'subscriptions' is used up for this connection: 3 of at most 3/);
    expect(await first.run('{ __typename }')).toEqual({ data: { __typename: 'Query' } });

    const second = await s.open(s.alice);
    expect(refusal(await s.subscribe(second, s.alice))).toBeUndefined();
    expect(refusal(await s.subscribe(second, s.alice, REPLICA_LOAD, { id: s.aliceDeployment.id }))).toBeUndefined();
    const perKey = refusal(await s.subscribe(second, s.alice));
    expect(perKey?.extensions.code).toBe('RATE_LIMITED');
    expect(perKey?.message).toMatch(/budget 'subscriptions' is used up for this API key: 5 of at most 5/);

    const bobs = await s.open(s.bob);
    expect(refusal(await s.subscribe(bobs, s.bob))).toBeUndefined();
    expect(refusal(await s.subscribe(bobs, s.bob))).toBeUndefined();
    const perServer = refusal(await s.subscribe(bobs, s.bob));
    expect(perServer?.extensions.code).toBe('UNAVAILABLE');
    expect(perServer?.message).toMatch(/budget 'subscriptions' is used up for this server: 7 of at most 7/);
    expect(s.held('subscriptions', 'server')).toBe(7);

    // A subscription its client completes gives its place back at once.
    first.complete(kept[0]);
    await waitFor(() => s.held('subscriptions', 'server') === 6, 10_000, 'the completed subscription given back');
    expect(refusal(await s.subscribe(bobs, s.bob))).toBeUndefined();
  });

  it('a socket that keeps sending operations the budget refuses is closed (4429) at its 20th refusal, and what it queued is not read', async () => {
    const socket = await s.open(s.alice);
    const started = Array.from({ length: 300 }, () => socket.start(DEPLOYMENT_UPDATED));
    await waitFor(() => socket.close !== null, 10_000, 'the socket closed');
    expect(socket.close).toMatchObject({ code: 4429 });
    expect(String(socket.close!.reason)).toMatch(/operations refused by the budget on this connection/);
    // Three held (the socket's share), 20 refused; the rest were never answered.
    const answered = started.filter((operation) => operation.results.length > 0).length;
    expect(answered).toBeLessThanOrEqual(20);
    await waitFor(() => s.held('subscriptions', 'server') === 0, 5_000, 'its holds given back');
  });

  it('a socket over its key\'s share is closed with 4429, over the server\'s with 1013, the reason naming the budget', async () => {
    for (let index = 0; index < 3; index++) await s.open(s.alice);
    await expect(s.open(s.alice)).rejects.toThrow(/closed 4429 budget 'sockets' is used up for this API key: 3 of at most 3/);
    await s.open(s.bob);
    await s.open(s.bob);
    await expect(s.open(s.bob)).rejects.toThrow(/closed 1013 budget 'sockets' is used up for this server: 5 of at most 5/);
    expect(s.held('sockets', 'server')).toBe(5);
    // The refused ones held nothing, and a closed socket's place is free again.
    await s.sockets[0].end();
    await waitFor(() => s.held('sockets', 'server') === 4, 10_000, 'the closed socket given back');
    await s.open(s.bob);
  });

  it('holds are given back on every path: complete, close, abrupt termination, a cut before the answer, revocation (4403)', async () => {
    for (let round = 0; round < 20; round++) {
      const socket = await s.open(s.alice);
      const operations = [
        await s.subscribe(socket, s.alice), await s.subscribe(socket, s.alice), await s.subscribe(socket, s.alice, REPLICA_LOAD, { id: s.aliceDeployment.id }),
      ];
      expect(operations.map(refusal)).toEqual([undefined, undefined, undefined]);
      socket.complete(operations[0]);
      await waitFor(() => s.held('subscriptions', 'key', { keyId: s.alice.apiKeyId }) === 2, 10_000, 'the completed subscription given back');
      if (round % 2 === 0) socket.terminate();
      else await socket.end();
      await waitFor(() => s.held('subscriptions', 'server') === 0 && s.held('sockets', 'server') === 0, 10_000, `round ${round}'s holds given back`);
    }
    // Subscriptions sent and the socket cut before the server has checked them (replicaLoad reads the deployment first).
    for (let round = 0; round < 10; round++) {
      const socket = await s.open(s.alice);
      socket.start(DEPLOYMENT_UPDATED);
      socket.start(REPLICA_LOAD, { id: s.aliceDeployment.id });
      socket.start(REPLICA_LOAD, { id: s.aliceDeployment.id });
      if (round % 2 === 0) await sleep(round);
      socket.terminate();
    }
    await waitFor(() => s.held('subscriptions', 'server') === 0 && s.held('sockets', 'server') === 0, 5_000, 'the cut sockets\' holds given back');

    const { apiKey, plaintext } = await s.test.server.controlPlane.apiKeys.create(s.alice.workspaceId, 'key to revoke');
    const doomed = await s.open(s.alice, plaintext);
    await s.subscribe(doomed, s.alice);
    await s.subscribe(doomed, s.alice, REPLICA_LOAD, { id: s.aliceDeployment.id });
    expect(s.held('subscriptions', 'key', { keyId: apiKey.id })).toBe(2);
    expect(s.held('sockets', 'key', { keyId: apiKey.id })).toBe(1);
    await s.test.server.controlPlane.apiKeys.revoke(s.alice.workspaceId, apiKey.id);
    expect((await doomed.closed).code).toBe(4403);
    await waitFor(() => s.held('subscriptions', 'key', { keyId: apiKey.id }) === 0 && s.held('sockets', 'key', { keyId: apiKey.id }) === 0,
      10_000, 'the revoked key\'s holds given back');
  });

  it('stopping the server gives back what its sockets and subscriptions held', async () => {
    const socket = await s.open(s.alice);
    await s.subscribe(socket, s.alice);
    await s.subscribe(socket, s.alice, REPLICA_LOAD, { id: s.aliceDeployment.id });
    expect(s.held('subscriptions', 'server')).toBe(2);
    const budget = s.test.server.controlPlane.budget;
    await s.test.server.stop();
    expect(budget.used('subscriptions', 'server')).toBe(0);
    expect(budget.used('sockets', 'server')).toBe(0);
    expect(s.test.server.gateway.subscriptions.size).toBe(0);
  });
});

describe('an event is rendered once for all the subscribers of its deployment', () => {
  const s = suite({});

  it('1 event × 100 subscribers with the same selection is 1 rendering; each gets its own id and the data; other deployments\' subscribers get nothing', async () => {
    const hub = s.test.server.gateway.subscriptions;
    const alices: Operation[] = [];
    for (let index = 0; index < 10; index++) {
      const socket = await s.open(s.alice);
      for (let operation = 0; operation < 10; operation++) alices.push(socket.start(REPLICA_LOAD, { id: s.aliceDeployment.id }));
    }
    const bobs = await s.open(s.bob);
    const bobsLoad = bobs.start(REPLICA_LOAD, { id: s.bobDeployment.id });
    const bobsUpdates = bobs.start(DEPLOYMENT_UPDATED);
    await waitFor(() => hub.size === 102, 10_000, '102 subscriptions held');
    expect(alices.every((operation) => operation.results.length === 0)).toBe(true);

    const events = s.test.server.controlPlane.events;
    let before = hub.renders;
    events.emit('replicaLoad', replicaLoad(s.aliceDeployment.id, s.alice.workspaceId, 7));
    await waitFor(() => alices.every((operation) => operation.results.length === 1), 10_000, 'every subscriber to get the event');
    expect(hub.renders - before).toBe(1);
    const expected = { data: { replicaLoad: { deploymentId: s.aliceDeployment.id, replicaId: 'rep_render_once', inFlight: 7, queued: 2, engineHealth: 'ok' } } };
    for (const operation of alices) expect(operation.results[0]).toEqual(expected);
    // Each on its own operation id: GraphQLSocket files a message under the id it carries.
    expect(new Set(alices.map((operation) => operation.id)).size).toBe(10);

    // Bob's deployment's event: one rendering, for Bob's one subscriber only.
    before = hub.renders;
    events.emit('replicaLoad', replicaLoad(s.bobDeployment.id, s.bob.workspaceId, 3));
    await waitFor(() => bobsLoad.results.length === 1, 5_000, 'Bob\'s event');
    expect(hub.renders - before).toBe(1);
    expect(bobsLoad.results[0]).toEqual({ data: { replicaLoad: expect.objectContaining({ deploymentId: s.bobDeployment.id, inFlight: 3 }) } });

    // An event of a deployment nobody follows touches no subscription; one that names Alice's
    // deployment but another workspace reaches none of Alice's (channels carry the event's workspace).
    before = hub.renders;
    events.emit('replicaLoad', replicaLoad('dep_nobody_follows', s.alice.workspaceId, 1));
    events.emit('replicaLoad', replicaLoad(s.aliceDeployment.id, s.bob.workspaceId, 1));
    await sleep(200);
    expect(hub.renders - before).toBe(0);
    expect(alices.every((operation) => operation.results.length === 1)).toBe(true);
    expect(bobsUpdates.results).toEqual([]);

    // A second selection among the same deployment's subscribers: one rendering each.
    const other = (await s.open(s.alice)).start('subscription($id: ID!) { replicaLoad(deploymentId: $id) { inFlight } }', { id: s.aliceDeployment.id });
    await waitFor(() => hub.size === 103, 5_000, 'the 103rd subscription');
    before = hub.renders;
    events.emit('replicaLoad', replicaLoad(s.aliceDeployment.id, s.alice.workspaceId, 9));
    await waitFor(() => other.results.length === 1 && alices.every((operation) => operation.results.length === 2), 10_000, 'the second event');
    expect(hub.renders - before).toBe(2);
    expect(other.results[0]).toEqual({ data: { replicaLoad: { inFlight: 9 } } });
  });
});
