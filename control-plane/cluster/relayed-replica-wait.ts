import type { ColdStartQueue } from '../dispatch/cold-start-queue';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { RelayedReplicaWait } from './relay-server';

/**
 * RelayServer's wait for a replica: a relayed job for a deployment with none here joins this
 * server's cold-start queue as a request taken here would (the queue's rules: only a
 * deployment that scales to zero waits, within its coldStartQueueLimit and the longest wait).
 * Its waiting is published with this server's load, so the capacity loop starts a replica for it.
 */
export function relayedReplicaWait(deployments: Pick<DeploymentStore, 'find'>, coldStarts: () => Pick<ColdStartQueue, 'wait'>): RelayedReplicaWait {
  return async (deploymentId, client) => {
    const deployment = await deployments.find(deploymentId);
    const waiting = deployment && deployment.status !== 'Deleted' ? coldStarts().wait(deployment, client) : null;
    if (waiting === null) return 'not_waiting';
    const waitedMs = await waiting;
    return waitedMs === null ? 'left' : { waitedMs };
  };
}
