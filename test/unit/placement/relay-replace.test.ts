/**
 * A relayed job its peer sends back `agent_draining` before it produced anything (the relaying
 * server's view of the peer's replicas is a heartbeat old: they left meanwhile) runs elsewhere,
 * as a local job refused by a draining replica is retried: here, or on another peer with a ready
 * replica, else it fails as it came (the client's 503). Real gRPC between a real RelayClient and
 * real RelayServers on port 0; every server's replicas are real AgentConnections in a real
 * Dispatcher; what each server reports of its peers is the test's (a registry fake).
 */
import * as grpc from '@grpc/grpc-js';
import { JobRouter } from '../../../control-plane/cluster/job-router';
import { RelayClient } from '../../../control-plane/cluster/relay-client';
import { RelayServer } from '../../../control-plane/cluster/relay-server';
import type { DeploymentLoad, Peer, ServerRegistry } from '../../../control-plane/cluster/server-registry';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { agent, recordingLogger, RecordingListener, request, type FakeAgent } from '../scheduling/fakes';
import { loadRelayService } from '../../../proto/cluster/v1';

const TOKEN = 'relay-secret';

/** A called server: its RelayServer on a real gRPC port, and the replicas of dep_a it holds. */
async function peerServer(id: string, replicas: string[]) {
  const dispatcher = new Dispatcher();
  const agents = new Map<string, FakeAgent>();
  for (const replicaId of replicas) {
    const replica = agent(dispatcher, { replicaId, deploymentId: 'dep_a' });
    dispatcher.register(replica.connection);
    agents.set(replicaId, replica);
  }
  const relayServer = new RelayServer(dispatcher, recordingLogger().logger);
  relayServer.setToken(TOKEN);
  const server = new grpc.Server();
  server.addService(loadRelayService().service, relayServer.handlers);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))));
  const assigned = (replicaId: string) => agents.get(replicaId)!.frames.filter((frame) => frame.frame === 'assign').length;
  return {
    id, relayAddress: `127.0.0.1:${port}`, assigned,
    stop: () => {
      relayServer.close();
      server.forceShutdown();
    },
  };
}

function load(ready: number, freeSlots: number): DeploymentLoad {
  return { ready, freeSlots, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };
}

type View = Array<{ peer: { id: string; relayAddress: string }; load: DeploymentLoad }>;

/**
 * The relaying server: a JobRouter with its own replicas (`local`, each full when `full`), its
 * view of the peers, and `readPeers` (its next registry heartbeat, which may bring a new view).
 */
function relayingServer(view: View, local: { full: boolean } | null = null, maxParkMs = 200) {
  const dispatcher = new Dispatcher();
  let localAgent: FakeAgent | null = null;
  if (local) {
    localAgent = agent(dispatcher, { replicaId: 'rep_here', deploymentId: 'dep_a', maxConcurrency: 1 });
    dispatcher.register(localAgent.connection);
    if (local.full) dispatcher.dispatchTo(localAgent.connection, request(), new RecordingListener());
  }
  const asPeers = (seen: View): Peer[] => seen.map(({ peer, load: deploymentLoad }) => ({ id: peer.id, relayAddress: peer.relayAddress, load: { dep_a: deploymentLoad } }));
  let peers = asPeers(view);
  const listeners: Array<() => void> = [];
  const registry = { peers: () => peers, onPeers: (listener: () => void) => listeners.push(listener) } as unknown as ServerRegistry;
  const relay = new RelayClient(() => TOKEN, 'srv_b');
  const router = new JobRouter(dispatcher, registry, relay, undefined, undefined, maxParkMs);
  relay.onDraining((job, fromPeerId) => router.replace(job, fromPeerId));
  const localAssigns = () => localAgent?.frames.filter((frame) => frame.frame === 'assign').length ?? 0;
  const readPeers = (seen: View) => {
    peers = asPeers(seen);
    for (const listener of listeners) listener();
  };
  return { router, relay, localAssigns, readPeers };
}

/** Resolves when `condition` holds (the relay's events arrive over real gRPC). */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('JobRouter.replace: a relayed job sent back unstarted', () => {
  const stops: Array<() => void> = [];
  afterEach(() => {
    for (const stop of stops.splice(0)) stop();
  });

  it('runs on another peer that reports a ready replica', async () => {
    const emptied = await peerServer('srv_a', []);
    const holder = await peerServer('srv_c', ['rep_c']);
    stops.push(emptied.stop, holder.stop);
    // The view is stale: srv_a still reports 8 free slots, more than srv_c's 1, so the job goes there first.
    const b = relayingServer([{ peer: emptied, load: load(1, 8) }, { peer: holder, load: load(1, 1) }]);
    stops.push(() => b.relay.close());
    const listener = new RecordingListener();
    const job = b.router.dispatch(request({ deploymentId: 'dep_a', replicaId: 'rep_gone' }), listener);
    await until(() => holder.assigned('rep_c') === 1, 'the job on srv_c');
    await until(() => job.replicaId === 'rep_c', 'the replica named');
    expect(job.attempts).toBe(2);
    expect(job.finished).toBe(false);
    expect(listener.terminals).toEqual([]);
  });

  it('runs here, queued on a full local replica, when no other peer has one', async () => {
    const emptied = await peerServer('srv_a', []);
    stops.push(emptied.stop);
    const b = relayingServer([{ peer: emptied, load: load(1, 8) }], { full: true });
    stops.push(() => b.relay.close());
    const job = b.router.dispatch(request({ deploymentId: 'dep_a' }), new RecordingListener());
    expect(job.replicaId).toBe('');
    await until(() => job.replicaId === 'rep_here', 'the job moved here');
    await until(() => b.localAssigns() === 2, 'its Assign to the local agent');
  });

  it('fails as it came (agent_draining: the client\'s 503) with nowhere else to go, and a batch line is never moved (its runner re-queues it)', async () => {
    const emptied = await peerServer('srv_a', []);
    const holder = await peerServer('srv_c', ['rep_c']);
    stops.push(emptied.stop, holder.stop);
    const alone = relayingServer([{ peer: emptied, load: load(1, 8) }]);
    const withHolder = relayingServer([{ peer: emptied, load: load(1, 8) }, { peer: holder, load: load(1, 1) }]);
    stops.push(() => alone.relay.close(), () => withHolder.relay.close());
    for (const [b, batch] of [[alone, false], [withHolder, true]] as const) {
      const listener = new RecordingListener();
      const job = b.router.dispatch(request({ deploymentId: 'dep_a', batch }), listener);
      await until(() => job.finished, 'the job ended');
      expect(listener.terminals).toEqual(['failed:agent_draining']);
      expect(job.attempts).toBe(1);
    }
    expect(holder.assigned('rep_c')).toBe(0);
  });

  /**
   * srv_c's replica just joined: srv_a (which released the job's cold-start wait on seeing it)
   * sends the job back, and this server has not read srv_c's row yet.
   */
  async function holderNotYetRead() {
    const emptied = await peerServer('srv_a', []);
    const holder = await peerServer('srv_c', ['rep_c']);
    stops.push(emptied.stop, holder.stop);
    const b = relayingServer([{ peer: emptied, load: load(1, 8) }], null, 10_000);
    stops.push(() => b.relay.close());
    const parked = () => (b.router as unknown as { parked: { size: number } }).parked.size;
    return { emptied, holder, b, parked };
  }

  it('with nowhere to go yet, waits for the next read of the peers and runs on a replica that read brings', async () => {
    const { emptied, holder, b, parked } = await holderNotYetRead();
    const listener = new RecordingListener();
    const job = b.router.dispatch(request({ deploymentId: 'dep_a' }), listener);
    await until(() => job.replicaId === '' && job.attempts === 1 && listener.terminals.length === 0 && parked() === 1, 'the job parked');
    b.readPeers([{ peer: emptied, load: load(1, 8) }, { peer: holder, load: load(1, 1) }]);
    await until(() => holder.assigned('rep_c') === 1, 'the job on srv_c');
    await until(() => job.replicaId === 'rep_c', 'the replica named');
    expect(listener.terminals).toEqual([]);
  });

  it('a parked job whose client leaves ends at once as canceled and is never run; one that the next read does not help fails as it came', async () => {
    const { emptied, holder, b, parked } = await holderNotYetRead();

    const leaving = new RecordingListener();
    const left = b.router.dispatch(request({ deploymentId: 'dep_a' }), leaving);
    await until(() => parked() === 1, 'the job parked');
    left.cancel('the client went away');
    expect(leaving.terminals).toEqual(['failed:canceled']);
    expect(parked()).toBe(0);

    const unlucky = new RecordingListener();
    b.router.dispatch(request({ deploymentId: 'dep_a' }), unlucky);
    await until(() => parked() === 1, 'the second job parked');
    b.readPeers([{ peer: emptied, load: load(1, 8) }]);
    await until(() => unlucky.terminals.length === 1, 'the second job ended');
    expect(unlucky.terminals).toEqual(['failed:agent_draining']);
    // The first one's client left: a later read never runs it.
    b.readPeers([{ peer: emptied, load: load(1, 8) }, { peer: holder, load: load(1, 1) }]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(holder.assigned('rep_c')).toBe(0);
    expect(leaving.terminals).toEqual(['failed:canceled']);
  });
});
