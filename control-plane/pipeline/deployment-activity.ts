import type { LocalDemand } from '../cluster/server-registry';
import type { Deployment } from '../deployments/deployment.entity';
import { scalesToZero } from '../deployments/scaled-to-zero';
import type { ColdStartQueue } from '../dispatch/cold-start-queue';

/**
 * A deployment silent this long is no longer published (deleted ones go so): the capacity loop
 * remembers the latest arrival it saw, and a new leader counts idleness from when it first looks.
 */
const FORGET_AFTER_MS = 7 * 86_400_000;

/**
 * When each deployment that scales to zero last had an owner request arrive at this server, and
 * how many wait here for a first replica: what scale to zero decides on. Published with this
 * server's load (ServerRegistry), so the capacity loop, on whichever server runs it, sees every
 * server's arrivals and waiting requests. Only those deployments: the others never idle to zero,
 * and every server's row is rewritten each heartbeat. A number per deployment; noting an arrival
 * allocates nothing once the deployment has been seen.
 */
export class DeploymentActivity implements LocalDemand {
  private readonly lastArrivals = new Map<string, number>();

  constructor(private readonly coldStarts: Pick<ColdStartQueue, 'waiting'>, private readonly now: () => number = Date.now) {}

  /** An owner request for the deployment arrived here (admitted: text, embeddings or media). */
  arrived(deployment: Pick<Deployment, 'id' | 'scaleToZeroAfterSeconds'>): void {
    if (scalesToZero(deployment)) this.lastArrivals.set(deployment.id, this.now());
  }

  lastArrival(deploymentId: string): number | undefined {
    return this.lastArrivals.get(deploymentId);
  }

  /** Every request waiting for a replica arrived first, so the deployments seen are all there is to publish. */
  forEachDeployment(visit: (deploymentId: string, waiting: number, lastRequestAt: number | undefined) => void): void {
    const forgetBefore = this.now() - FORGET_AFTER_MS;
    for (const [deploymentId, at] of this.lastArrivals) {
      const waiting = this.coldStarts.waiting(deploymentId);
      if (at < forgetBefore && waiting === 0) this.lastArrivals.delete(deploymentId);
      else visit(deploymentId, waiting, at);
    }
  }
}
