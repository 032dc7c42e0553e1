import type { DataSource, Repository } from 'typeorm';
import { In, Not } from 'typeorm';
import type { Logger } from 'pino';
import type { Hello } from '../../proto/worker/v1';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import { newId } from '../ids';
import type { CapacityProvider } from '../providers/capacity-provider';
import { hashSecret, newSecret } from '../secrets';
import { Replica } from './replica.entity';

export type JoinResult =
  | { ok: true; replica: Replica; deployment: Deployment }
  | { ok: false; code: 'bad_token' | 'capacity_full'; message: string };

const ACTIVE = Not(In(['Terminated']));

/**
 * Replica rows and their agents: places the replicas a deployment needs on its provider,
 * admits agents that present a join token, and releases replicas on pause or delete.
 */
export class ReplicaManager {
  private readonly replicas: Repository<Replica>;

  constructor(
    dataSource: DataSource,
    private readonly deployments: DeploymentStore,
    private readonly providers: ReadonlyMap<string, CapacityProvider>,
    private readonly logger: Logger,
  ) {
    this.replicas = dataSource.getRepository(Replica);
  }

  async list(deploymentId: string): Promise<Replica[]> {
    return await this.replicas.find({ where: { deploymentId }, order: { createdAt: 'ASC' } });
  }

  async listActive(deploymentId: string): Promise<Replica[]> {
    return await this.replicas.find({ where: { deploymentId, status: ACTIVE }, order: { createdAt: 'ASC' } });
  }

  /** Starts replicas until the deployment has its minimum (external agents join by themselves). */
  async ensure(deployment: Deployment): Promise<void> {
    const provider = this.providers.get(deployment.provider);
    if (!provider) return;
    const active = await this.listActive(deployment.id);
    for (let count = active.length; count < deployment.minReplicas; count++) {
      const joinToken = newSecret('jt-');
      const replica = await this.replicas.save(this.replicas.create({
        id: newId('rep'), deploymentId: deployment.id, status: 'Creating', statusReason: 'starting agent',
        provider: provider.kind, joinTokenHash: hashSecret(joinToken), gpus: [],
      }));
      await provider.launch(deployment, replica, joinToken);
    }
  }

  /** Admits an agent's Hello: binds it to its replica (or a new replica of an external deployment). */
  async join(joinToken: string, hello: Hello): Promise<JoinResult> {
    const tokenHash = hashSecret(joinToken);
    let replica = await this.replicas.findOne({ where: { joinTokenHash: tokenHash, status: ACTIVE } });
    let deployment = replica ? await this.deployments.find(replica.deploymentId) : null;
    if (!replica) {
      deployment = await this.deployments.repository.findOne({ where: { joinTokenHash: tokenHash } });
      if (deployment && isServing(deployment)) replica = await this.externalReplica(deployment, tokenHash, hello);
      if (deployment && isServing(deployment) && !replica) {
        return { ok: false, code: 'capacity_full', message: `deployment already has its maximum of ${deployment.maxReplicas} replicas` };
      }
    }
    if (!replica || !deployment || !isServing(deployment)) {
      return { ok: false, code: 'bad_token', message: 'unknown, revoked or released join token' };
    }
    Object.assign(replica, {
      status: 'Running', statusReason: null, agentId: hello.agentId, agentVersion: hello.agentVersion,
      engineKind: hello.engine?.kind ?? null, engineVersion: hello.engine?.version ?? null,
      maxConcurrency: hello.maxConcurrency, gpus: hello.gpus ?? [], lastSeenAt: new Date(),
      startedAt: replica.startedAt ?? new Date(),
    });
    await this.replicas.save(replica);
    if (deployment.status === 'Creating') deployment = await this.deployments.transition(deployment, 'Running');
    return { ok: true, replica, deployment };
  }

  /** The agent's stream ended: the replica stays (its agent may reconnect) but takes no work. */
  async lost(replicaId: string, reason: string): Promise<void> {
    await this.replicas.update({ id: replicaId, status: Not('Terminated') }, { status: 'Unhealthy', statusReason: reason, lastSeenAt: new Date() });
  }

  /** Stops every replica of the deployment (pause, delete). */
  async release(deployment: Deployment, reason: string): Promise<void> {
    const replicas = await this.listActive(deployment.id);
    await this.replicas.update({ deploymentId: deployment.id, status: ACTIVE }, { status: 'Terminated', statusReason: reason, terminatedAt: new Date() });
    await Promise.all(replicas.map((replica) => this.providers.get(replica.provider)?.terminate(replica.id)));
  }

  /**
   * On start-up, replicas of local agents from a previous run are gone with that process:
   * terminate their rows, then place fresh ones for every deployment that should be serving.
   */
  async reconcile(): Promise<void> {
    await this.replicas.update({ provider: 'local', status: ACTIVE }, { status: 'Terminated', statusReason: 'server restarted', terminatedAt: new Date() });
    for (const deployment of await this.deployments.listActive()) {
      if (deployment.status === 'Paused') continue;
      try {
        const restarting = deployment.provider === 'local' && deployment.status === 'Running'
          ? await this.deployments.transition(deployment, 'Creating', 'restarting replicas after a server restart')
          : deployment;
        await this.ensure(restarting);
      } catch (error) {
        this.logger.error({ err: error, deploymentId: deployment.id }, 'could not place replicas');
      }
    }
  }

  private async externalReplica(deployment: Deployment, tokenHash: string, hello: Hello): Promise<Replica | null> {
    const agentTokenHash = hashSecret(`${tokenHash}:${hello.agentId}`);
    const existing = await this.replicas.findOne({ where: { joinTokenHash: agentTokenHash } });
    if (existing && existing.status !== 'Terminated') return existing;
    if ((await this.listActive(deployment.id)).length >= deployment.maxReplicas) return null;
    if (existing) await this.replicas.delete({ id: existing.id });
    return await this.replicas.save(this.replicas.create({
      id: newId('rep'), deploymentId: deployment.id, status: 'Creating', statusReason: null,
      provider: 'external', joinTokenHash: agentTokenHash, gpus: [],
    }));
  }
}

function isServing(deployment: Deployment): boolean {
  return deployment.status === 'Creating' || deployment.status === 'Running';
}
