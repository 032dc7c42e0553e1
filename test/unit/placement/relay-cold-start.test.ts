/**
 * A relayed job that finds no replica at the called server, of a deployment that scales to
 * zero, waits there for one (the relaying server's view of that server's replicas is up to a
 * heartbeat old: just after the last replica stopped, it still relays). The called side is
 * real: RelayServer, relayedReplicaWait, a ColdStartQueue on a manual clock and a Dispatcher
 * whose replicas are real AgentConnections; the peer's stream is an in-memory fake, and the
 * deployment row a stub of the store's `find`.
 */
import { RelayServer } from '../../../control-plane/cluster/relay-server';
import { relayedReplicaWait } from '../../../control-plane/cluster/relayed-replica-wait';
import { ColdStartQueue, type ColdStartRefusal } from '../../../control-plane/dispatch/cold-start-queue';
import type { Deployment } from '../../../control-plane/deployments/deployment.entity';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import type { DispatchRequest } from '../../../control-plane/dispatch/job';
import { ERROR_TABLE } from '../../../control-plane/openai/error-table';
import { jobFailureError } from '../../../control-plane/openai/openai-error';
import { agent, flush, recordingLogger, request } from '../scheduling/fakes';
import { peerStream } from './fake-relay-call';

const DEADLINE = 1_700_000_000_000;
const TEXT: DispatchRequest = request({ deploymentId: 'dep_a', stream: true, includeUsage: true, deadlineUnixMs: DEADLINE, streamWindowBytes: 2048 });

function calledServer(options: { scaleToZero?: boolean; maxWaitMs?: number; status?: Deployment['status'] } = {}) {
  let clock = 1_000;
  const dispatcher = new Dispatcher();
  const announced: string[] = [];
  const refused: ColdStartRefusal[] = [];
  const queue = new ColdStartQueue({
    hasReplica: (deploymentId) => dispatcher.connections(deploymentId).some((connection) => !connection.draining && !connection.closed),
    coldStart: (deploymentId) => announced.push(deploymentId),
    refused: (_deploymentId, reason) => refused.push(reason),
    now: () => clock,
  }, { maxWaitMs: options.maxWaitMs ?? 60_000, startupEstimateMs: 10_000 });
  dispatcher.onCapacity((deploymentId) => queue.capacity(deploymentId));
  const row = {
    id: 'dep_a', status: options.status ?? 'Running', scaleToZeroAfterSeconds: options.scaleToZero === false ? null : 60, coldStartQueueLimit: 10,
  } as Deployment;
  const lookups: string[] = [];
  const deployments = { find: async (id: string) => (lookups.push(id), id === row.id ? row : null) };
  const relayServer = new RelayServer(dispatcher, recordingLogger().logger, undefined, null, relayedReplicaWait(deployments, () => queue));
  const { call, relay } = peerStream(relayServer);
  /** A replica of dep_a joins this server: its agent's Assign frames. */
  const replicaJoins = (replicaId: string) => {
    const replica = agent(dispatcher, { replicaId, deploymentId: 'dep_a' });
    dispatcher.register(replica.connection);
    return replica;
  };
  return { call, queue, relay, replicaJoins, announced, refused, lookups, advance: (ms: number) => (clock += ms) };
}

describe('RelayServer: a relayed job that finds no replica here', () => {
  it('of a deployment that scales to zero waits in this server\'s queue, starts a replica, and runs on the first to join with its deadline moved back by the wait', async () => {
    const server = calledServer();
    const id = server.relay({ ...TEXT, replicaId: 'rep_stopped' });
    await flush();
    expect(server.queue.waiting('dep_a')).toBe(1);
    expect(server.announced).toEqual(['dep_a']);
    expect(server.call.written).toEqual([]);

    server.advance(1_500);
    const replica = server.replicaJoins('rep_new');
    await flush();
    expect(server.call.startedOn).toEqual({ [id]: 'rep_new' });
    expect(server.call.failures()).toEqual([]);
    const assigns = replica.frames.filter((frame) => frame.frame === 'assign');
    expect(assigns).toHaveLength(1);
    expect(Number(assigns[0].assign!.deadlineUnixMs)).toBe(DEADLINE + 1_500);
    expect(server.queue.waiting('dep_a')).toBe(0);
  });

  it('canceled by the relaying server while it waits: leaves the queue at once, ends as failed(canceled), and never runs', async () => {
    const server = calledServer();
    const id = server.relay(TEXT);
    await flush();
    expect(server.queue.waiting('dep_a')).toBe(1);
    server.call.emit('data', { request: 'cancel', relayJobId: id, cancel: { reason: 'the client went away' } });
    await flush();
    expect(server.queue.waiting('dep_a')).toBe(0);
    expect(server.call.failures()).toEqual([{ relayJobId: id, code: 'canceled' }]);
    const replica = server.replicaJoins('rep_new');
    await flush();
    expect(replica.frames.filter((frame) => frame.frame === 'assign')).toEqual([]);
  });

  it('when the relaying server\'s stream ends while it waits: leaves the queue, and never runs', async () => {
    const server = calledServer();
    server.relay(TEXT);
    server.relay(TEXT);
    await flush();
    expect(server.queue.waiting('dep_a')).toBe(2);
    server.call.emit('end');
    await flush();
    expect(server.queue.waiting('dep_a')).toBe(0);
    const replica = server.replicaJoins('rep_new');
    await flush();
    expect(replica.frames.filter((frame) => frame.frame === 'assign')).toEqual([]);
  });

  it('past the longest wait: failed(no_pod_available), which the relaying server answers as 503 no_pod_available with a Retry-After', async () => {
    const server = calledServer({ maxWaitMs: 20 });
    const id = server.relay(TEXT);
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(server.call.failures()).toEqual([{ relayJobId: id, code: 'no_pod_available' }]);
    expect(server.refused).toEqual(['max_wait']);
    const failed = server.call.written.flatMap((message) => message.events).find((event) => event.event === 'jobEvent')!.jobEvent.failed!;
    const answer = jobFailureError({ code: failed.code, message: failed.message, engineStatus: failed.engineStatus, engineBody: null, usage: undefined });
    expect(answer).toMatchObject({ code: 'no_pod_available', retryAfterSeconds: 5, message: expect.stringContaining('no replica of this deployment was ready within') });
    expect(ERROR_TABLE[answer.code].status).toBe(503);
  });

  it.each([
    ['keeps its replicas (no scale to zero)', { scaleToZero: false }],
    ['was deleted', { status: 'Deleted' as const }],
  ])('of a deployment that %s fails back at once as agent_draining (the relaying server\'s 503), waiting nowhere', async (_name, options) => {
    const server = calledServer(options);
    const id = server.relay(TEXT);
    await flush();
    expect(server.call.failures()).toEqual([{ relayJobId: id, code: 'agent_draining' }]);
    expect(server.queue.waiting('dep_a')).toBe(0);
    expect(server.announced).toEqual([]);
  });

  it('a guest\'s job never waits: it fails back as shared_pool_busy without looking the deployment up', async () => {
    const server = calledServer();
    const id = server.relay({ ...TEXT, guest: true });
    await flush();
    expect(server.call.failures()).toEqual([{ relayJobId: id, code: 'shared_pool_busy' }]);
    expect(server.lookups).toEqual([]);
  });
});
