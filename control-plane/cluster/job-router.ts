import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { placeJob, type PeerOffer } from './placement';
import { AppError } from '../errors/app-error';
import type { RelayClient } from './relay-client';
import type { ServerRegistry } from './server-registry';

/**
 * Where an owner's text job runs, across every server (placement.ts: a free local slot first,
 * else the peer with the most free slots, else queued on the least loaded replica here). So a
 * request on any server reaches any ready replica of its deployment.
 */
export class JobRouter {
  constructor(private readonly dispatcher: Dispatcher, private readonly registry: Pick<ServerRegistry, 'peers'>, private readonly relay: Pick<RelayClient, 'run'>) {}

  /** Sends the job now; throws `no_replica_available` when no server holds a ready replica of the deployment. */
  dispatch(request: DispatchRequest, listener: JobListener): Job {
    const local = this.dispatcher.leastLoaded(request.deploymentId);
    const placed = placeJob<AgentConnection>(local, local?.freeSlots ?? 0, () => this.offers(request.deploymentId), true);
    if (placed?.kind === 'local') return this.dispatcher.dispatchTo(placed.local, request, listener);
    if (placed) return this.relay.run(placed.offer.peer, request, listener);
    throw new AppError('no_replica_available', 'no replica of this deployment is ready; retry shortly', { retryAfterSeconds: 5 });
  }

  /** Peers with a ready replica of the deployment, and their free slots. */
  private *offers(deploymentId: string): Iterable<PeerOffer> {
    for (const peer of this.registry.peers()) {
      const load = peer.load[deploymentId];
      if (load && load.ready > 0) yield { peer, deploymentId, slots: load.freeSlots };
    }
  }
}
