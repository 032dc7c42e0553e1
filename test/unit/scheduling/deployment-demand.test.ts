import pino from 'pino';
import type { DataSource } from 'typeorm';
import { clusterLoad, clusterWaiting } from '../../../control-plane/cluster/cluster-load';
import { ServerRegistry, type Peer } from '../../../control-plane/cluster/server-registry';
import { Dispatcher } from '../../../control-plane/dispatch/dispatcher';
import { DeploymentActivity } from '../../../control-plane/pipeline/deployment-activity';

const ZERO = { id: 'dep_zero', scaleToZeroAfterSeconds: 60 };
const ALWAYS_ON = { id: 'dep_on', scaleToZeroAfterSeconds: null };

/** This server's registry over an empty dispatcher (no agent here: the deployments are at zero), and these peers as its last heartbeat read them. */
function registry(activity: DeploymentActivity, peers: Peer[] = []): Pick<ServerRegistry, 'loadSnapshot' | 'peers'> {
  const servers = new ServerRegistry({} as DataSource, 'server-a', '127.0.0.1:1', new Dispatcher(), { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 },
    pino({ level: 'silent' }), () => 0, activity);
  return { loadSnapshot: () => servers.loadSnapshot(), peers: () => peers };
}

const peer = (id: string, load: Peer['load']): Peer => ({ id, relayAddress: '127.0.0.1:2', load });
const idle = { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };

describe('what a server publishes of scale to zero\'s demand', () => {
  it('publishes the last arrival and the requests waiting of deployments that scale to zero, with no replica here', () => {
    const clock = { now: 5_000 };
    const waiting = new Map([[ZERO.id, 3]]);
    const activity = new DeploymentActivity({ waiting: (id) => waiting.get(id) ?? 0 }, () => clock.now);
    activity.arrived(ZERO);
    activity.arrived(ALWAYS_ON);
    clock.now = 6_000;
    activity.arrived(ZERO);
    expect(activity.lastArrival(ZERO.id)).toBe(6_000);
    // A deployment that never idles to zero is not tracked: every server rewrites its row each heartbeat.
    expect(activity.lastArrival(ALWAYS_ON.id)).toBeUndefined();
    expect(registry(activity).loadSnapshot()).toEqual({ [ZERO.id]: { ...idle, replicas: [], waiting: 3, lastRequestAt: 6_000 } });
  });

  it('forgets a deployment silent for a week with nothing waiting', () => {
    const clock = { now: 0 };
    const activity = new DeploymentActivity({ waiting: () => 0 }, () => clock.now);
    activity.arrived(ZERO);
    clock.now = 7 * 86_400_000 + 1;
    expect(registry(activity).loadSnapshot()).toEqual({});
    expect(activity.lastArrival(ZERO.id)).toBeUndefined();
  });

  it('sums the waiting over every server and keeps the latest arrival (what the capacity loop and GraphQL read)', () => {
    const activity = new DeploymentActivity({ waiting: (id) => (id === ZERO.id ? 1 : 0) }, () => 1_000);
    activity.arrived(ZERO);
    const servers = registry(activity, [
      peer('server-b', { [ZERO.id]: { ...idle, waiting: 2, lastRequestAt: 4_000 } }),
      // A server older than scale to zero publishes neither field.
      peer('server-c', { [ZERO.id]: { ...idle } }),
    ]);
    expect(clusterLoad(servers, ZERO.id)).toMatchObject({ ready: 0, waiting: 3, lastRequestAt: 4_000 });
    expect(clusterLoad(servers, ALWAYS_ON.id)).toMatchObject({ waiting: 0 });
    expect(clusterLoad(servers, ALWAYS_ON.id).lastRequestAt).toBeUndefined();
    expect(clusterWaiting(servers, 1, ZERO.id)).toBe(3);
  });
});
