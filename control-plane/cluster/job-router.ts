import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { RelayClient } from './relay-client';
import type { Peer, ServerRegistry } from './server-registry';

/**
 * Where a text job runs, across every server: a replica whose agent this server holds when one
 * has a free slot (no hop), else the peer whose replicas have the most free slots (relayed over
 * cluster.v1), else the least loaded one here, queued on its agent. So a request on any server
 * reaches any ready replica of its deployment, and least-loaded choice spans the cluster with
 * peers' load at most one registry heartbeat old.
 */
export class JobRouter {
  constructor(private readonly dispatcher: Dispatcher, private readonly registry: ServerRegistry, private readonly relay: RelayClient) {}

  /** Sends the job now; throws `no_replica_available` when no server holds a ready replica of the deployment. */
  dispatch(request: DispatchRequest, listener: JobListener): Job {
    const local = this.dispatcher.leastLoaded(request.deploymentId);
    if (local && local.freeSlots > 0) return this.dispatcher.dispatchTo(local, request, listener);
    const peer = this.bestPeer(request.deploymentId, local);
    if (peer) return this.relay.run(peer, request, listener);
    if (local) return this.dispatcher.dispatchTo(local, request, listener);
    throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
  }

  /** The peer with the most free slots for the deployment; with a busy local replica, only one that has a free slot. */
  private bestPeer(deploymentId: string, local: AgentConnection | null): Peer | null {
    let best: Peer | null = null;
    let bestFree = local ? 0 : -1;
    for (const peer of this.registry.peers()) {
      const load = peer.load[deploymentId];
      if (!load || load.ready === 0) continue;
      if (load.freeSlots > bestFree) {
        best = peer;
        bestFree = load.freeSlots;
      }
    }
    return best;
  }
}
