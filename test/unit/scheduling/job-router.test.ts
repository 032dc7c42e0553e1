/**
 * JobRouter: a text job runs on a replica this server holds when one has a free slot (no hop),
 * else on the peer reporting the most free slots (relayed), else queued on the least loaded
 * replica here; with none anywhere, 503 `no_replica_available`. The registry and relay client
 * are in-memory fakes; the local replicas are real AgentConnections in a real Dispatcher.
 */
import type { RelayClient } from '../../../control-plane/cluster/relay-client';
import { JobRouter } from '../../../control-plane/cluster/job-router';
import type { DeploymentLoad, Peer, ServerRegistry } from '../../../control-plane/cluster/server-registry';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { Job, type DispatchRequest, type JobListener } from '../../../control-plane/dispatch/job';
import { agent, RecordingListener, request, reserveSlots, thrownCode } from './fakes';

function load(ready: number, freeSlots: number): DeploymentLoad {
  return { ready, freeSlots, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };
}

function peer(id: string, deployments: Record<string, DeploymentLoad>): Peer {
  return { id, relayAddress: `${id}:7000`, load: deployments };
}

/** A relay client that records which peer each job was relayed to. */
class FakeRelay {
  readonly runs: Array<{ peer: string; request: DispatchRequest }> = [];

  run(target: Peer, dispatchRequest: DispatchRequest, listener: JobListener): Job {
    this.runs.push({ peer: target.id, request: dispatchRequest });
    return new Job(`relayed_${this.runs.length}`, dispatchRequest, listener, {
      replicaId: `${target.id}/replica`, cancelJob: () => {}, creditJob: () => {},
    });
  }
}

interface LocalSpec {
  max: number;
  busy: number;
  reserved?: number;
  draining?: boolean;
}

function router(locals: LocalSpec[], peers: Peer[]) {
  const dispatcher = new Dispatcher();
  const connections = locals.map((spec, index) => {
    const { connection } = agent(dispatcher, { replicaId: `local${index}`, maxConcurrency: spec.max });
    dispatcher.register(connection);
    for (let job = 0; job < spec.busy; job++) dispatcher.dispatchTo(connection, request(), new RecordingListener());
    reserveSlots(connection, spec.reserved ?? 0);
    connection.draining = spec.draining ?? false;
    return connection;
  });
  const relay = new FakeRelay();
  const registry = { peers: () => peers, onPeers: () => {} } as unknown as ServerRegistry;
  return { router: new JobRouter(dispatcher, registry, relay as unknown as RelayClient), connections, relay };
}

describe('JobRouter', () => {
  test.each<[string, LocalSpec[], Peer[], string]>([
    ['a local replica with a free slot, even when a peer has more free slots',
      [{ max: 4, busy: 3 }], [peer('p1', { dep_a: load(2, 8) })], 'local0'],
    ['the least loaded local replica when several have free slots',
      [{ max: 4, busy: 3 }, { max: 4, busy: 1 }], [], 'local1'],
    ['the peer with the most free slots when every local replica is full',
      [{ max: 2, busy: 2 }], [peer('p1', { dep_a: load(1, 1) }), peer('p2', { dep_a: load(2, 3) }), peer('p3', { dep_a: load(1, 2) })], 'p2'],
    ['a peer when the local replica\'s free slot is reserved by a scheduler',
      [{ max: 2, busy: 1, reserved: 1 }], [peer('p1', { dep_a: load(1, 1) })], 'p1'],
    ['the full local replica (queued on its agent) when no peer has a free slot',
      [{ max: 2, busy: 2 }], [peer('p1', { dep_a: load(1, 0) })], 'local0'],
    ['a peer when no replica is here, even one with no free slot (it queues there)',
      [], [peer('p1', { dep_a: load(1, 0) })], 'p1'],
    ['a peer when the only local replica is draining',
      [{ max: 4, busy: 0, draining: true }], [peer('p1', { dep_a: load(1, 0) })], 'p1'],
    ['not a peer whose replicas of the deployment are none ready',
      [{ max: 2, busy: 2 }], [peer('p1', { dep_a: load(0, 0) }), peer('p2', { dep_b: load(3, 3) })], 'local0'],
  ])('runs the job on %s', (_name, locals, peers, expected) => {
    const { router: jobRouter, relay } = router(locals, peers);
    const job = jobRouter.dispatch(request(), new RecordingListener());
    const where = relay.runs.length > 0 ? relay.runs[0].peer : job.replicaId;
    expect(where).toBe(expected);
  });

  test.each<[string, LocalSpec[], Peer[]]>([
    ['no server holds a replica', [], []],
    ['peers hold only other deployments', [], [peer('p1', { dep_b: load(2, 2) })]],
    ['peers report the deployment with no ready replica', [], [peer('p1', { dep_a: load(0, 0) })]],
    ['the only local replica is draining and no peer has one', [{ max: 4, busy: 0, draining: true }], []],
  ])('throws no_replica_available when %s', (_name, locals, peers) => {
    const { router: jobRouter, relay } = router(locals, peers);
    expect(thrownCode(() => jobRouter.dispatch(request(), new RecordingListener()))).toBe('no_replica_available');
    expect(relay.runs).toEqual([]);
  });

  test('a relayed job carries the request unchanged; a local one is assigned to the replica', () => {
    const { router: jobRouter, relay, connections } = router([{ max: 1, busy: 1 }], [peer('p1', { dep_a: load(1, 1) })]);
    const relayedRequest = request({ model: 'model-a', stream: true });
    jobRouter.dispatch(relayedRequest, new RecordingListener());
    expect(relay.runs).toEqual([{ peer: 'p1', request: relayedRequest }]);
    expect(connections[0].inFlight).toBe(1);
  });
});
