import type { DeploymentLoad, ServerRegistry } from './server-registry';

/**
 * A deployment's load over every server: this one's agents now, plus what each live peer last
 * reported (at most one registry heartbeat old). The autoscaler, which runs on one server,
 * sees the replicas whose agents joined any of them.
 */
export function clusterLoad(registry: ServerRegistry, deploymentId: string): DeploymentLoad {
  const total: DeploymentLoad = { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0 };
  const add = (load: DeploymentLoad | undefined) => {
    if (!load) return;
    total.ready += load.ready;
    total.freeSlots += load.freeSlots;
    total.inFlight += load.inFlight;
    total.queued += load.queued;
    total.guestReady += load.guestReady ?? 0;
    total.guestSlots += load.guestSlots ?? 0;
  };
  add(registry.loadSnapshot()[deploymentId]);
  for (const peer of registry.peers()) add(peer.load[deploymentId]);
  return total;
}
