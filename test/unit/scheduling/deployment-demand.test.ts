import pino from 'pino';
import type { DataSource } from 'typeorm';
import { clusterLoad, clusterWaiting } from '../../../control-plane/cluster/cluster-load';
import { ServerRegistry, type LocalDemand, type Peer } from '../../../control-plane/cluster/server-registry';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';

const ZERO = 'dep_zero';
const ALWAYS_ON = 'dep_on';

/** This server's registry over an empty dispatcher (no agent here: the deployments are at zero), and these peers as its last heartbeat read them. */
function registry(demand: LocalDemand, peers: Peer[] = []): Pick<ServerRegistry, 'loadSnapshot' | 'peers'> {
  const servers = new ServerRegistry({} as DataSource, 'server-a', '127.0.0.1:1', new Dispatcher(), { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 },
    pino({ level: 'silent' }), () => 0, () => ({}), demand);
  return { loadSnapshot: () => servers.loadSnapshot(), peers: () => peers };
}

/** The cold-start queue's side of LocalDemand: these deployments have this many requests waiting here. */
function waitingHere(waiting: Record<string, number>): LocalDemand {
  return { forEachDeployment: (visit) => Object.entries(waiting).forEach(([id, count]) => visit(id, count)) };
}

const peer = (id: string, load: Peer['load']): Peer => ({ id, relayAddress: '127.0.0.1:2', load });
const idle = { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };

describe('what a server publishes of scale to zero\'s demand', () => {
  it('publishes the requests waiting here for a first replica, with no replica here', () => {
    expect(registry(waitingHere({ [ZERO]: 3 })).loadSnapshot()).toEqual({ [ZERO]: { ...idle, replicas: [], waiting: 3 } });
    expect(registry(waitingHere({})).loadSnapshot()).toEqual({});
  });

  it('sums the waiting over every server (what the capacity loop and GraphQL read)', () => {
    const servers = registry(waitingHere({ [ZERO]: 1 }), [
      peer('server-b', { [ZERO]: { ...idle, waiting: 2 } }),
      // A server older than scale to zero publishes no `waiting`.
      peer('server-c', { [ZERO]: { ...idle } }),
    ]);
    expect(clusterLoad(servers, ZERO)).toMatchObject({ ready: 0, waiting: 3 });
    expect(clusterLoad(servers, ALWAYS_ON)).toMatchObject({ waiting: 0 });
    expect(clusterWaiting(servers, 1, ZERO)).toBe(3);
  });
});
