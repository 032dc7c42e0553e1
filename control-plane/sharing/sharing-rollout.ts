import type { Logger } from 'pino';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { ReplicaManager } from '../replicas/replica-manager';

/** The reason a replica ended for the rolling restart; the endpoint's 503 says the same. */
export const RESTARTING_FOR_SHARING = 'restarting for sharing: priority scheduling is being turned on';

/**
 * The rolling restart that opens a deployment to guests, one replica at a time: while a
 * deployment is `activating`, each capacity pass restarts one Running replica that has no
 * priority scheduling (placement starts its replacement with it), waits while any replica is
 * still starting, and marks the deployment `shared` once every replica runs with it.
 */
export class SharingRollout {
  constructor(private readonly deployments: DeploymentStore, private readonly replicas: ReplicaManager, private readonly logger: Logger) {}

  async step(deployment: Deployment): Promise<void> {
    if (deployment.sharing !== 'activating') return;
    const active = await this.replicas.listActive(deployment.id);
    // One at a time: a replacement (or any replica) still starting holds the next restart.
    if (active.some((replica) => replica.status !== 'Running')) return;
    const stale = active.find((replica) => !replica.priorityScheduling);
    if (stale) {
      this.logger.info({ deploymentId: deployment.id, replicaId: stale.id }, 'restarting a replica for sharing');
      await this.replicas.restart(stale, RESTARTING_FOR_SHARING);
      return;
    }
    if (active.length > 0) await this.deployments.setSharing(deployment.id, 'shared', 'activating');
  }
}
