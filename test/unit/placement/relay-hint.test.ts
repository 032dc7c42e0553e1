/**
 * The replica a relaying server's routing chose, end to end on the called side:
 * `toRelayJob`/`fromRelayJob` carry `replicaId` over the wire (cluster.v1 RelayJob.replica_id),
 * and RelayServer runs a relayed owner job on that replica while it is neither draining nor
 * closed, else on its own least loaded one (dispatcher.dispatch). The peer's stream is an
 * in-memory fake; the replicas are real AgentConnections in a real Dispatcher.
 */
import { RelayServer } from '../../../control-plane/cluster/relay-server';
import { fromRelayJob, toRelayJob } from '../../../control-plane/dispatch/assign-mapping';
import type { AgentConnection } from '../../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import type { DispatchRequest } from '../../../control-plane/dispatch/job';
import { agent, flush, recordingLogger, RecordingListener, request } from '../scheduling/fakes';
import { overTheWire, peerStream, RelayJobType } from './fake-relay-call';


const TEXT: DispatchRequest = request({ deploymentId: 'dep_a', stream: true, includeUsage: true, deadlineUnixMs: 1_700_000_000_000, streamWindowBytes: 2048 });

describe('toRelayJob / fromRelayJob: replicaId', () => {
  it('carries a chosen replica id over the wire and back', () => {
    const relayed = overTheWire({ ...TEXT, replicaId: 'rep_42' });
    expect(relayed.replicaId).toBe('rep_42');
    expect(fromRelayJob(relayed as never)).toEqual({ guest: false, embedding: undefined, ...TEXT, replicaId: 'rep_42' });
  });

  it('gives back a request without replicaId when none was chosen', () => {
    expect(fromRelayJob(overTheWire(TEXT) as never)).not.toHaveProperty('replicaId');
    expect(fromRelayJob(overTheWire({ ...TEXT, replicaId: '' }) as never)).not.toHaveProperty('replicaId');
  });

  // BUG: toRelayJob sets `replicaId: ''` when the request has none, and proto-loader (protobufjs) writes a field that is
  // set, even to its default: the RelayJob gains the bytes 1a 00 (field 3, empty string). assign-mapping.ts promises
  // "a field a request leaves unset stays unset" on the wire; test/unit/assign-mapping.test.ts
  // ("relays the request without a job id, its window as it is") fails for the same reason.
  it('leaves replica_id off the wire when none was chosen', () => {
    const unchosen = RelayJobType.serialize(toRelayJob(TEXT)).toString('hex');
    const withoutField = RelayJobType.serialize({ deploymentId: TEXT.deploymentId, assign: toRelayJob(TEXT).assign }).toString('hex');
    expect(unchosen).toBe(withoutField);
  });

  it('reads a RelayJob from an older server (no replica_id field) as no replica chosen', () => {
    const fromOlder = RelayJobType.deserialize(RelayJobType.serialize({ deploymentId: 'dep_a', assign: toRelayJob(TEXT).assign }));
    expect(fromRelayJob(fromOlder as never)).not.toHaveProperty('replicaId');
  });
});

interface ReplicaSpec {
  id: string;
  busy?: number;
  max?: number;
  deploymentId?: string;
  draining?: boolean;
  closed?: boolean;
}

function calledServer(specs: ReplicaSpec[]) {
  const dispatcher = new Dispatcher();
  const connections = new Map<string, AgentConnection>();
  for (const spec of specs) {
    const { connection } = agent(dispatcher, { replicaId: spec.id, deploymentId: spec.deploymentId ?? 'dep_a', maxConcurrency: spec.max ?? 4 });
    dispatcher.register(connection);
    for (let job = 0; job < (spec.busy ?? 0); job++) dispatcher.dispatchTo(connection, request({ deploymentId: connection.deploymentId }), new RecordingListener());
    connection.draining = spec.draining ?? false;
    connection.closed = spec.closed ?? false;
    connections.set(spec.id, connection);
  }
  const relayServer = new RelayServer(dispatcher, recordingLogger().logger);
  const { call, relay } = peerStream(relayServer);
  return { relayServer, call, connections, relay };
}

describe('RelayServer: the replica the relaying server chose', () => {
  it('runs the job on the chosen replica, even when another one here is less loaded', async () => {
    const { call, connections, relay } = calledServer([{ id: 'rep_a' }, { id: 'rep_b', busy: 3 }]);
    const id = relay({ ...TEXT, replicaId: 'rep_b' });
    await flush();
    expect(call.startedOn).toEqual({ [id]: 'rep_b' });
    expect(connections.get('rep_b')!.inFlight).toBe(4);
    expect(connections.get('rep_a')!.inFlight).toBe(0);
  });

  it('runs it on the chosen replica when it is full (the job waits in that agent\'s queue)', async () => {
    const { call, relay } = calledServer([{ id: 'rep_a' }, { id: 'rep_b', max: 2, busy: 2 }]);
    const id = relay({ ...TEXT, replicaId: 'rep_b' });
    await flush();
    expect(call.startedOn).toEqual({ [id]: 'rep_b' });
  });

  it.each<[string, ReplicaSpec[], string]>([
    ['is draining', [{ id: 'rep_a', busy: 1 }, { id: 'rep_b', draining: true }, { id: 'rep_c', busy: 2 }], 'rep_b'],
    ['is closed', [{ id: 'rep_a', busy: 1 }, { id: 'rep_b', closed: true }, { id: 'rep_c', busy: 2 }], 'rep_b'],
    ['is not here (it left, or never was)', [{ id: 'rep_a', busy: 1 }, { id: 'rep_c', busy: 2 }], 'rep_gone'],
    ['is a replica of another deployment', [{ id: 'rep_a', busy: 1 }, { id: 'rep_c', busy: 2 }, { id: 'rep_other', deploymentId: 'dep_b' }], 'rep_other'],
  ])('runs it on the least loaded replica here when the chosen one %s', async (_name, specs, chosen) => {
    const { call, connections, relay } = calledServer(specs);
    const id = relay({ ...TEXT, replicaId: chosen });
    await flush();
    expect(call.startedOn).toEqual({ [id]: 'rep_a' });
    expect(connections.get('rep_a')!.inFlight).toBe(2);
  });

  it('runs a job without a chosen replica on the least loaded one here', async () => {
    const { call, relay } = calledServer([{ id: 'rep_a', busy: 2 }, { id: 'rep_b', busy: 1 }]);
    const id = relay(TEXT);
    await flush();
    expect(call.startedOn).toEqual({ [id]: 'rep_b' });
  });

  it('fails the job back (agent_draining) when the chosen replica drains and no other is here', async () => {
    const { call, relay } = calledServer([{ id: 'rep_a', draining: true }]);
    const id = relay({ ...TEXT, replicaId: 'rep_a' });
    await flush();
    expect(call.startedOn).toEqual({});
    expect(call.failures()).toEqual([{ relayJobId: id, code: 'agent_draining' }]);
  });

  it('gives the agent the job without the replica id in its Assign (the agent does not need it)', async () => {
    const dispatcher = new Dispatcher();
    const replica = agent(dispatcher, { replicaId: 'rep_a' });
    dispatcher.register(replica.connection);
    peerStream(new RelayServer(dispatcher, recordingLogger().logger)).relay({ ...TEXT, replicaId: 'rep_a' });
    await flush();
    const assigns = replica.frames.filter((frame) => frame.frame === 'assign');
    expect(assigns).toHaveLength(1);
    expect(assigns[0].assign).not.toHaveProperty('replicaId');
    expect(assigns[0].assign!.body).toEqual(TEXT.body);
  });
});
