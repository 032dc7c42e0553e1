/**
 * JobRouter with jobs addressed to a LoRA adapter (control-plane/cluster/job-router.ts,
 * placement/adapter-aware.ts): only replicas with adapter slots take them, here or on a peer;
 * the one holding the adapter (its latest heartbeat here, a peer's registry row there) is
 * chosen, a peer's through the relay with the replica's id; with none holding it, its
 * rendezvous home. The registry publishes each replica's slots and residency, bounded.
 * Local replicas are real AgentConnections in a real Dispatcher; registry and relay are fakes.
 */
import type { RelayClient } from '../../../control-plane/cluster/relay-client';
import { JobRouter } from '../../../control-plane/cluster/job-router';
import { ServerRegistry, type Peer, type ReplicaLoad } from '../../../control-plane/cluster/server-registry';
import type { AgentConnection } from '../../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { Job, type DispatchRequest, type JobListener } from '../../../control-plane/dispatch/job';
import { adapterHome } from '../../../control-plane/placement/adapter-home';
import type { RoutingReason } from '../../../control-plane/placement/placement-policy';
import type { AdapterRef, AdapterResidency, Heartbeat } from '../../../proto/worker/v1';
import { agent, RecordingListener, request, thrownCode } from './fakes';

const ADAPTER = 'ad_0000000000000001.r1';

function ref(name: string): AdapterRef {
  return { name, displayName: 'support-bot', format: 'ADAPTER_FORMAT_PEFT_TAR', source: 'https://storage.invalid/x', sha256: '', sizeBytes: 0, rank: 8, scale: 1 } as AdapterRef;
}

function heartbeat(adapters: Array<Pick<AdapterResidency, 'name' | 'state'>>): Heartbeat {
  return { health: 'ENGINE_HEALTH_READY', queued: 0, detail: '', adapters: adapters.map((adapter) => ({ loadMs: 0, error: '', lastUsedUnixMs: 0, ...adapter })) } as unknown as Heartbeat;
}

class FakeRelay {
  readonly runs: Array<{ peer: string; request: DispatchRequest }> = [];

  run(target: Peer, dispatchRequest: DispatchRequest, listener: JobListener): Job {
    this.runs.push({ peer: target.id, request: dispatchRequest });
    return new Job(`relayed_${this.runs.length}`, dispatchRequest, listener, { replicaId: dispatchRequest.replicaId ?? 'any', cancelJob: () => {}, creditJob: () => {} });
  }
}

function peerWith(replicas: ReplicaLoad[]): Peer {
  return { id: 'srv_b', relayAddress: 'srv_b:7000', load: { dep_a: { ready: replicas.length, freeSlots: 4, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, replicas } } };
}

function setup(locals: Array<{ id: string; maxLoras: number; holds?: string[] }>, peers: Peer[] = []) {
  const dispatcher = new Dispatcher();
  const connections: AgentConnection[] = [];
  for (const spec of locals) {
    const { connection } = agent(dispatcher, { replicaId: spec.id, maxLoras: spec.maxLoras, maxCpuLoras: 0 });
    connection.heartbeat = heartbeat((spec.holds ?? []).map((name) => ({ name, state: 'ADAPTER_STATE_GPU' })));
    dispatcher.register(connection);
    connections.push(connection);
  }
  const relay = new FakeRelay();
  const reasons: RoutingReason[] = [];
  const router = new JobRouter(dispatcher, { peers: () => peers, onPeers: () => {} }, relay as unknown as RelayClient, (_deployment, _policy, reason) => reasons.push(reason));
  const hint = { policy: 'prefix-aware' as const, fields: { messages: [{ role: 'user', content: 'hello' }] }, tenant: 'ws_a' };
  const send = (adapter = ADAPTER): string => {
    const before = relay.runs.length;
    const job = router.dispatch(request({ adapter: ref(adapter) }), new RecordingListener(), hint);
    return relay.runs.length > before ? `srv_b:${relay.runs.at(-1)!.request.replicaId}` : job.replicaId;
  };
  return { dispatcher, connections, relay, reasons, send };
}

describe('JobRouter: adapter jobs', () => {
  it('sends the job to the local replica whose heartbeat says it holds the adapter', () => {
    const { send, reasons } = setup([{ id: 'rep_a', maxLoras: 4 }, { id: 'rep_b', maxLoras: 4, holds: [ADAPTER] }, { id: 'rep_c', maxLoras: 4 }]);
    expect([send(), send()]).toEqual(['rep_b', 'rep_b']);
    expect(reasons).toEqual(['adapter_resident', 'adapter_resident']);
  });

  it('relays it to a peer\'s replica that holds it, with the replica\'s id', () => {
    const peer = peerWith([
      { id: 'rep_p1', load: 0, capacity: 4, maxLoras: 4, maxCpuLoras: 0, adapters: { gpu: ['other.r1'], cpu: [], loading: [] } },
      { id: 'rep_p2', load: 1, capacity: 4, maxLoras: 4, maxCpuLoras: 0, adapters: { gpu: [ADAPTER], cpu: [], loading: [] } },
    ]);
    const { send, reasons } = setup([{ id: 'rep_a', maxLoras: 4 }], [peer]);
    expect(send()).toBe('srv_b:rep_p2');
    expect(reasons).toEqual(['adapter_resident']);
  });

  it('sends a miss to the adapter\'s home among the replicas with slots, the same on any server', () => {
    const peer = peerWith([{ id: 'rep_p1', load: 0, capacity: 4, maxLoras: 2 }, { id: 'rep_p2', load: 0, capacity: 4 }]);
    const { send, reasons } = setup([{ id: 'rep_a', maxLoras: 4 }, { id: 'rep_none', maxLoras: 0 }], [peer]);
    const home = adapterHome([{ replicaId: 'rep_a' }, { replicaId: 'rep_p1' }], ADAPTER)!.replicaId;
    expect(send()).toBe(home === 'rep_a' ? 'rep_a' : 'srv_b:rep_p1');
    expect(reasons).toEqual(['adapter_home']);
  });

  it('answers 503 no_replica_available when no ready replica has adapter slots, and when none is ready at all', () => {
    const some = setup([{ id: 'rep_a', maxLoras: 0 }], [peerWith([{ id: 'rep_p1', load: 0, capacity: 4 }])]);
    const error = (() => {
      try {
        some.send();
      } catch (caught) {
        return caught as Error;
      }
      return null;
    })();
    expect(error?.message).toMatch(/serves adapters/);
    expect(thrownCode(() => some.send())).toBe('no_replica_available');
    expect(thrownCode(() => setup([]).send())).toBe('no_replica_available');
  });

  it('dispatches a relayed adapter job without a chosen replica only to a replica with slots, and retries it likewise', () => {
    const { dispatcher, connections } = setup([{ id: 'rep_none', maxLoras: 0 }, { id: 'rep_lora', maxLoras: 2 }, { id: 'rep_lora2', maxLoras: 2 }]);
    for (let index = 0; index < 4; index++) expect(dispatcher.dispatch(request({ adapter: ref(ADAPTER) }), new RecordingListener()).replicaId).toMatch(/^rep_lora/);
    for (let index = 0; index < 3; index++) {
      const job = dispatcher.dispatchTo(connections[1], request({ adapter: ref(ADAPTER) }), new RecordingListener());
      connections[1].jobs.delete(job.id);
      dispatcher.retry(job, connections[1]);
      expect(job.replicaId).toBe('rep_lora2');
    }
    const { dispatcher: without } = setup([{ id: 'rep_none', maxLoras: 0 }]);
    expect(thrownCode(() => without.dispatch(request({ adapter: ref(ADAPTER) }), new RecordingListener()))).toBe('no_replica_available');
  });

  it('publishes each replica\'s slots and residency to peers, cut to its slots', () => {
    const { dispatcher, connections } = setup([{ id: 'rep_a', maxLoras: 2, holds: ['a.r1', 'b.r1', 'c.r1'] }, { id: 'rep_none', maxLoras: 0 }]);
    connections[0].heartbeat = heartbeat([
      { name: 'a.r1', state: 'ADAPTER_STATE_GPU' }, { name: 'b.r1', state: 'ADAPTER_STATE_LOADING' }, { name: 'c.r1', state: 'ADAPTER_STATE_GPU' },
      { name: 'd.r1', state: 'ADAPTER_STATE_CPU' }, { name: 'e.r1', state: 'ADAPTER_STATE_FAILED' },
    ]);
    const registry = new ServerRegistry(null as never, 'srv_a', '127.0.0.1:1', dispatcher, { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 }, null as never);
    const replicas = registry.loadSnapshot().dep_a.replicas!;
    expect(replicas).toEqual([
      { id: 'rep_a', load: 0, capacity: 4, maxLoras: 2, maxCpuLoras: 0, adapters: { gpu: ['a.r1'], loading: ['b.r1'], cpu: [] } },
      { id: 'rep_none', load: 0, capacity: 4 },
    ]);
  });
});
