import type { DeploymentStore } from '../deployments/deployment-store';
import { AppError } from '../errors/app-error';
import type { AutoscalingHistoryStore, AutoscalingPoint } from './autoscaling-history';
import type { MetricsHistoryStore, MetricsPoint, MetricsRange } from './metrics-history-store';

/**
 * A workspace's view of its deployments' minute history. Another workspace's deployment is
 * not found, as a missing one is: its existence is not the caller's to learn.
 */
export class DeploymentMetrics {
  constructor(
    private readonly deployments: Pick<DeploymentStore, 'find'>,
    private readonly store: Pick<MetricsHistoryStore, 'points'>,
    private readonly autoscalingStore: Pick<AutoscalingHistoryStore, 'points'>,
  ) {}

  async points(workspaceId: string, deploymentId: string, range: MetricsRange): Promise<MetricsPoint[]> {
    await this.own(workspaceId, deploymentId);
    return await this.store.points(deploymentId, range);
  }

  /** Attainment of the SLO, arrivals against the forecast, replicas and cost against fixed-max, per step of minutes (autoscaling-history.ts). */
  async autoscaling(workspaceId: string, deploymentId: string, from: Date, to: Date, stepMinutes = 1): Promise<AutoscalingPoint[]> {
    const deployment = await this.own(workspaceId, deploymentId);
    return await this.autoscalingStore.points(deployment, from, to, stepMinutes);
  }

  private async own(workspaceId: string, deploymentId: string) {
    const deployment = await this.deployments.find(deploymentId);
    if (!deployment || deployment.workspaceId !== workspaceId) {
      throw new AppError('not_found', `no deployment '${deploymentId.slice(0, 64)}' in this workspace`, { param: 'deploymentId' });
    }
    return deployment;
  }
}
