import type { DeploymentLoad, ServerRegistry } from './server-registry';

/**
 * A deployment's load over every server: this one's agents now, plus what each live peer last
 * reported (at most one registry heartbeat old). The autoscaler, which runs on one server,
 * sees the replicas whose agents joined any of them, the requests waiting at any of them for a
 * first replica (arrivals and idle time: autoscaling/cluster-scaling-signals.ts).
 */
export function clusterLoad(registry: Pick<ServerRegistry, 'loadSnapshot' | 'peers'>, deploymentId: string): DeploymentLoad {
  const total: DeploymentLoad = { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };
  let waiting = 0;
  const add = (load: DeploymentLoad | undefined) => {
    if (!load) return;
    total.ready += load.ready;
    total.freeSlots += load.freeSlots;
    total.inFlight += load.inFlight;
    total.queued += load.queued;
    total.guestReady += load.guestReady ?? 0;
    total.guestSlots += load.guestSlots ?? 0;
    waiting += load.waiting ?? 0;
  };
  add(registry.loadSnapshot()[deploymentId]);
  for (const peer of registry.peers()) add(peer.load[deploymentId]);
  total.waiting = waiting;
  return total;
}

/** Requests waiting for a first replica of the deployment at every server: `here` (this server's, now) plus each live peer's last report. */
export function clusterWaiting(registry: Pick<ServerRegistry, 'peers'>, here: number, deploymentId: string): number {
  let waiting = here;
  for (const peer of registry.peers()) waiting += peer.load[deploymentId]?.waiting ?? 0;
  return waiting;
}
