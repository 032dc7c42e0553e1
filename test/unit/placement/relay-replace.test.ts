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

/** The relaying server: a JobRouter with its own replicas (`local`, each full when `full`) and its view of the peers. */
function relayingServer(view: Array<{ peer: { id: string; relayAddress: string }; load: DeploymentLoad }>, local: { full: boolean } | null = null) {
  const dispatcher = new Dispatcher();
  let localAgent: FakeAgent | null = null;
  if (local) {
    localAgent = agent(dispatcher, { replicaId: 'rep_here', deploymentId: 'dep_a', maxConcurrency: 1 });
    dispatcher.register(localAgent.connection);
    if (local.full) dispatcher.dispatchTo(localAgent.connection, request(), new RecordingListener());
  }
  const peers: Peer[] = view.map(({ peer, load: deploymentLoad }) => ({ id: peer.id, relayAddress: peer.relayAddress, load: { dep_a: deploymentLoad } }));
  const relay = new RelayClient(() => TOKEN, 'srv_b');
  const router = new JobRouter(dispatcher, { peers: () => peers } as unknown as ServerRegistry, relay);
  relay.onDraining((job, fromPeerId) => router.replace(job, fromPeerId));
  const localAssigns = () => localAgent?.frames.filter((frame) => frame.frame === 'assign').length ?? 0;
  return { router, relay, localAssigns };
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
});
