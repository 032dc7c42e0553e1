import type { DataSource, Repository } from 'typeorm';
import { In, IsNull, Not } from 'typeorm';
import type { Logger } from 'pino';
import type { Hello, StartupPhase } from '../../proto/worker/v1';
import type { Metering } from '../billing/metering';
import { chooseOffer } from './placement';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentStore } from '../deployments/deployment-store';
import { COLD_START_REASON, SCALED_TO_ZERO_REASON, wantedReplicas } from '../deployments/scaled-to-zero';
import { newId } from '../ids';
import type { CapacityProvider, HostTokens } from './capacity-provider';
import { hashSecret, newSecret } from '../secrets';
import { Replica, type StartFailureReason } from './replica.entity';
import { PROVISION_PHASE, provisionPhase, storedAgentPhases } from './startup-phases';
import type { ReplicaQuota } from './replica-quota';
import { AppError } from '../errors/app-error';

export type JoinResult =
  | { ok: true; replica: Replica; deployment: Deployment; priorityScheduling: boolean }
  | { ok: false; code: 'bad_token' | 'capacity_full' | 'host_idle'; message: string };

const ACTIVE = Not(In(['Terminated']));
/** Every reason placement gives for not placing contains this (and nothing else does). */
const WAITING_FOR_CAPACITY = 'waiting for';

/** Which replica to give up first when scaling down: one still starting, else the least loaded. */
export type ReplicaLoad = (replicaId: string) => number;

/** Told how replicas' start-ups end (the start-up metrics). */
export interface StartupListener {
  /** The replica became ready for the first time; its start-up phases are final. */
  ready(replica: Replica): void;
  /** The replica was ended for never becoming ready. */
  startFailed(replica: Replica, reason: StartFailureReason): void;
}

/** Why a deployment must not get a new replica yet after replicas failed to start (replica-start-watchdog.ts), or null. */
export type StartHold = (deploymentId: string) => Promise<string | null>;

/** A replica's stored phases: what it has from the control plane (provision) followed by the agent's, as sent. */
const MERGED_PHASES = `COALESCE((SELECT jsonb_agg(phase) FROM jsonb_array_elements(startup_phases) phase WHERE phase->>'name' = '${PROVISION_PHASE}'), '[]'::jsonb) || CAST(:phases AS jsonb)`;

/**
 * Replica rows and their agents: places the replicas a deployment wants on the cheapest
 * offer under its price cap, admits agents that present a join (or host) token, turns a
 * replica Running when its engine is ready, and releases replicas on scale-down, pause or
 * delete. Every exit from Running goes through Metering, which bills the last stretch.
 */
export class ReplicaManager {
  private readonly replicas: Repository<Replica>;
  /** Deployments being placed right now: concurrent ensure() calls for one deployment queue up. */
  private readonly placing = new Map<string, Promise<void>>();
  /** Tells a replica's connected agent to stop taking work and leave (set once the agent server exists). */
  private drain: (replicaId: string, reason: string) => void = () => {};
  private startupListener: StartupListener = { ready: () => {}, startFailed: () => {} };
  private startHold: StartHold = async () => null;

  constructor(
    dataSource: DataSource,
    private readonly deployments: DeploymentStore,
    private readonly providers: ReadonlyMap<string, CapacityProvider>,
    private readonly catalog: Catalog,
    private readonly metering: Metering,
    private readonly staticHosts: HostTokens | null,
    private readonly logger: Logger,
    /** This server: it holds the streams of the agents it spawns and of those that join it. */
    private readonly serverId = '',
    /** The tenant budget's say on a new replica (local capacity); none: every placement is allowed. */
    private readonly quota: Pick<ReplicaQuota, 'hold'> | null = null,
  ) {
    this.replicas = dataSource.getRepository(Replica);
    this.dataSource = dataSource;
  }

  private readonly dataSource: DataSource;

  /** An ended replica's agent may still be connected (static hosts, external agents): it is drained. */
  setDrainer(drain: (replicaId: string, reason: string) => void): void {
    this.drain = drain;
  }

  /** Who hears start-ups end (metrics). */
  setStartupListener(listener: StartupListener): void {
    this.startupListener = listener;
  }

  /** The back-off after replicas that never became ready: placement waits for it. */
  setStartHold(hold: StartHold): void {
    this.startHold = hold;
  }

  async list(deploymentId: string): Promise<Replica[]> {
    return await this.replicas.find({ where: { deploymentId }, order: { createdAt: 'ASC' } });
  }

  async listActive(deploymentId: string): Promise<Replica[]> {
    return await this.replicas.find({ where: { deploymentId, status: ACTIVE }, order: { createdAt: 'ASC' } });
  }

  /**
   * Brings the deployment to its desired replica count: places missing replicas (saying on the
   * deployment why when no offer qualifies) and releases surplus ones. Serialised per deployment.
   */
  ensure(deployment: Deployment, load: ReplicaLoad = () => 0): Promise<void> {
    const previous = this.placing.get(deployment.id) ?? Promise.resolve();
    const next = previous.then(() => this.place(deployment.id, load)).finally(() => {
      if (this.placing.get(deployment.id) === next) this.placing.delete(deployment.id);
    });
    this.placing.set(deployment.id, next);
    return next;
  }

  /** Admits an agent's Hello: binds it to its replica (a new one for an external deployment, the assigned one for a static host). */
  async join(joinToken: string, hello: Hello): Promise<JoinResult> {
    const tokenHash = hashSecret(joinToken);
    let replica = await this.replicas.findOne({ where: { joinTokenHash: tokenHash, status: ACTIVE } });
    let deployment = replica ? await this.deployments.find(replica.deploymentId) : null;
    if (!replica && this.staticHosts) {
      const host = await this.staticHosts.hostByToken(tokenHash);
      // Even an idle host's Hello says what its cache holds: placement reads it when choosing a host.
      if (host) await this.staticHosts.cachedModelsReported(tokenHash, hello.cachedModels ?? []);
      if (host && !host.replicaId) return { ok: false, code: 'host_idle', message: `host ${host.name} has no replica assigned yet; retry later` };
      if (host?.replicaId) {
        replica = await this.replicas.findOne({ where: { id: host.replicaId, status: ACTIVE } });
        deployment = replica ? await this.deployments.find(replica.deploymentId) : null;
      }
    }
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
    // The agent is connected; the replica turns Running once its engine reports ready (markReady).
    // Conditional: a replica ended since it was read (scaled down, paused) stays ended.
    const now = new Date();
    // Its first Hello ends the provision phase (an external agent's replica is made by its Hello: it has none).
    const provisioned = replica.startupPhases.length === 0 && replica.provider !== 'external'
      ? { startupPhases: [provisionPhase(replica.createdAt, now, replica.provider)] } : {};
    const joined = {
      status: 'Creating' as const, statusReason: 'engine starting', agentId: hello.agentId, agentVersion: hello.agentVersion,
      engineKind: hello.engine?.kind ?? null, engineVersion: hello.engine?.version ?? null,
      maxConcurrency: hello.maxConcurrency, gpus: hello.gpus ?? [], lastSeenAt: now, serverId: this.serverId, ...provisioned,
    };
    const result = await this.replicas.update({ id: replica.id, status: ACTIVE }, joined);
    if (!result.affected) return { ok: false, code: 'bad_token', message: 'unknown, revoked or released join token' };
    // Asked for at placement (the deployment shares), granted only if the agent can do it: an
    // openai engine without priority scheduling never receives a guest. The row keeps what was
    // asked, so the rolling restart does not restart an incapable replica again and again.
    const priorityScheduling = replica.priorityScheduling && hello.priorityCapable === true;
    if (replica.priorityScheduling && !priorityScheduling) {
      this.logger.warn({ replicaId: replica.id, engine: hello.engine?.kind }, 'the replica was started for sharing but its engine has no priority scheduling: it takes no guests');
    }
    return { ok: true, replica: Object.assign(replica, joined), deployment, priorityScheduling };
  }

  /**
   * The replica's engine is ready: it takes work and its meter starts, and its start-up phases
   * (as the ready heartbeat carried them) are final. False when the replica has ended meanwhile.
   */
  async markReady(replicaId: string, phases: readonly StartupPhase[] = []): Promise<boolean> {
    const before = await this.replicas.findOne({ where: { id: replicaId } });
    const agentPhases = storedAgentPhases(phases);
    await this.replicas.createQueryBuilder().update(Replica)
      .set({
        status: 'Running', statusReason: null, loadPercent: 100,
        startedAt: () => 'COALESCE(started_at, statement_timestamp())', meteredUntil: () => 'statement_timestamp()', lastSeenAt: () => 'statement_timestamp()',
        ...(agentPhases.length > 0 ? { startupPhases: () => MERGED_PHASES } : {}),
      })
      .where(`id = :id AND status <> 'Terminated' AND status <> 'Running'`, { id: replicaId })
      .setParameter('phases', JSON.stringify(agentPhases))
      .execute();
    const replica = await this.replicas.findOne({ where: { id: replicaId } });
    if (replica?.status !== 'Running') return false;
    if (before && !before.startedAt) this.startupListener.ready(replica);
    const deployment = await this.deployments.find(replica.deploymentId);
    if (deployment?.status === 'Creating') await this.deployments.transition(deployment, 'Running');
    // A cold start is over once a replica serves.
    else if (deployment?.statusReason === COLD_START_REASON) await this.deployments.transition(deployment, deployment.status, null);
    else if (deployment) await this.deployments.replicasChanged(deployment.id);
    return true;
  }

  /** Model download / load progress while the engine starts, and its start-up phases so far; deployment subscribers see it. */
  async reportProgress(replicaId: string, deploymentId: string, percent: number, stage: string, phases: readonly StartupPhase[] = []): Promise<void> {
    const agentPhases = storedAgentPhases(phases);
    const result = await this.replicas.createQueryBuilder().update(Replica)
      .set({ loadPercent: percent, statusReason: stage || `loading the model: ${percent} %`, ...(agentPhases.length > 0 ? { startupPhases: () => MERGED_PHASES } : {}) })
      .where(`id = :id AND status = 'Creating'`, { id: replicaId })
      .setParameter('phases', JSON.stringify(agentPhases))
      .execute();
    if (result.affected) await this.deployments.replicasChanged(deploymentId);
  }

  /**
   * Ends a replica that never became ready (REPLICA_START_DEADLINE_MS passed, its agent exited,
   * its provider gave up), counted as a start failure: placement then waits out the start
   * back-off before the next (replica-start-watchdog.ts). False when it had become ready or
   * ended meanwhile: nothing is done.
   */
  async startFailed(replicaId: string, reason: StartFailureReason, message: string): Promise<boolean> {
    const replica = await this.markStartFailure(replicaId, reason);
    if (!replica) return false;
    await this.end([replica], message);
    return true;
  }

  /**
   * A local agent exited on its own: before its engine was ever ready that is a start failure
   * (the replica is replaced after the back-off); after, the replica is lost while its provider
   * restarts the agent.
   */
  async agentExited(replicaId: string, reason: string, restartInMs: number): Promise<void> {
    if (await this.startFailed(replicaId, 'exited', `its agent exited before its engine was ready: ${reason}; replaced`)) {
      const replica = await this.replicas.findOne({ where: { id: replicaId } });
      const deployment = replica ? await this.deployments.find(replica.deploymentId) : null;
      // Placed again now, or the back-off is said on the deployment now.
      if (deployment && isServing(deployment)) await this.ensure(deployment);
      return;
    }
    await this.lost(replicaId, `${reason}; restarting in ${Math.ceil(restartInMs / 1000)} s`);
  }

  /** Marks a replica that never became ready and has not ended as a start failure; the replica, or null when it does not qualify. */
  private async markStartFailure(replicaId: string, reason: StartFailureReason): Promise<Replica | null> {
    const result = await this.replicas.update({ id: replicaId, status: Not('Terminated'), startedAt: IsNull(), startFailure: IsNull() }, { startFailure: reason });
    if (!result.affected) return null;
    const replica = await this.replicas.findOne({ where: { id: replicaId } });
    if (replica) this.startupListener.startFailed(replica, reason);
    return replica;
  }

  /**
   * The agent's stream ended before its engine was ready: nothing to bill or take work from,
   * so only a Creating replica's reason changes. A provider that saw the agent exit says more
   * (its last line) and moves the replica to Unhealthy, so its write wins in either order.
   */
  async disconnectedWhileStarting(replicaId: string, reason: string): Promise<void> {
    await this.replicas.update({ id: replicaId, status: 'Creating' }, { statusReason: reason, loadPercent: null });
  }

  /** The provider says why a replica still starting is not there yet (a pod waiting for GPU capacity). */
  async providerWaiting(replicaId: string, reason: string): Promise<void> {
    const replica = await this.replicas.findOne({ where: { id: replicaId } });
    if (!replica || replica.status !== 'Creating' || replica.agentId) return;
    const result = await this.replicas.update({ id: replicaId, status: 'Creating' }, { statusReason: reason });
    if (result.affected) await this.deployments.replicasChanged(replica.deploymentId);
  }

  /**
   * The provider says the replica will not come (its image cannot be pulled, it crash-loops):
   * it ends with that reason; the next capacity pass places another once the provider's
   * back-off (`holdReason`) allows.
   */
  async providerFailed(replicaId: string, reason: string): Promise<void> {
    const replica = await this.replicas.findOne({ where: { id: replicaId } });
    if (!replica || replica.status === 'Terminated') return;
    // Never ready: it counts among the deployment's start failures.
    if (!replica.startedAt) await this.markStartFailure(replicaId, 'provider_failed');
    await this.end([replica], reason);
    const deployment = await this.deployments.find(replica.deploymentId);
    if (deployment && isServing(deployment)) await this.deployments.transition(deployment, deployment.status, `replica ${replica.id} failed: ${reason}`);
  }

  /** The agent's stream ended: the replica stays (its agent may reconnect) but takes no work and is not billed. */
  async lost(replicaId: string, reason: string): Promise<void> {
    await this.metering.leaveRunning([replicaId], 'Unhealthy', reason);
  }

  /** The replica's host is gone for good (reclaimed, removed, or silent too long): it is ended and a new one placed. */
  async hostLost(replicaId: string, reason: string, load?: ReplicaLoad): Promise<void> {
    const replica = await this.replicas.findOne({ where: { id: replicaId } });
    if (!replica || replica.status === 'Terminated') return;
    await this.end([replica], reason);
    const deployment = await this.deployments.find(replica.deploymentId);
    if (deployment && isServing(deployment)) await this.ensure(deployment, load);
  }

  /**
   * Ends one replica so that placement starts a new one in its place, with the deployment's
   * current settings (the rolling restart that turns on priority scheduling for sharing).
   */
  async restart(replica: Replica, reason: string): Promise<void> {
    await this.end([replica], reason);
    const deployment = await this.deployments.find(replica.deploymentId);
    if (deployment && isServing(deployment)) await this.ensure(deployment);
  }

  /**
   * Replicas whose agent streams a server that has gone silent held: agents this platform
   * spawned died with it and are ended and placed again; others (static hosts, external
   * agents) are Unhealthy until they rejoin through another server or are replaced.
   */
  async serversGone(liveServers: ReadonlySet<string>): Promise<number> {
    const stranded = (await this.replicas.find({ where: { status: In(['Creating', 'Running']) } }))
      .filter((replica) => replica.serverId && !liveServers.has(replica.serverId));
    for (const replica of stranded) {
      const reason = `its server (${replica.serverId}) stopped answering`;
      if (['local', 'market'].includes(replica.provider)) await this.hostLost(replica.id, reason);
      else await this.metering.leaveRunning([replica.id], 'Unhealthy', reason);
    }
    return stranded.length;
  }

  /** Stops every replica of the deployment (pause, delete). */
  async release(deployment: Deployment, reason: string): Promise<void> {
    await this.end(await this.listActive(deployment.id), reason);
  }

  /** Ends replicas: their last running stretch is billed, their deployments' subscribers told, their agents drained, their capacity given back. */
  private async end(replicas: Replica[], reason: string): Promise<void> {
    await this.metering.leaveRunning(replicas.map((replica) => replica.id), 'Terminated', reason);
    // Their deployments' subscribers hear it: a pause's own event was rendered before its replicas ended
    // (the console's list counted a terminated replica until something else changed).
    for (const deploymentId of new Set(replicas.map((replica) => replica.deploymentId))) await this.deployments.replicasChanged(deploymentId);
    for (const replica of replicas) this.drain(replica.id, reason);
    await Promise.all(replicas.map((replica) => this.providers.get(replica.provider)?.terminate(replica.id).catch((error) =>
      this.logger.warn({ err: error, replicaId: replica.id }, 'the provider could not release a replica'))));
  }

  /**
   * On start-up, replicas of local agents (and market hosts simulated on this machine) from a
   * previous run are gone with that process: end their rows, then place fresh ones for every
   * deployment that should be serving.
   */
  async reconcile(liveServers: ReadonlySet<string>): Promise<void> {
    // Only those of servers that are gone: a live peer's local agents are its own.
    const orphans = (await this.replicas.find({ where: { provider: In(['local', 'market']), status: ACTIVE } }))
      .filter((replica) => !replica.serverId || !liveServers.has(replica.serverId));
    await this.metering.leaveRunning(orphans.map((replica) => replica.id), 'Terminated', 'server restarted');
    // Providers whose replicas outlive a server (pods) match them up: what has no capacity left is replaced.
    for (const provider of this.providers.values()) {
      if (!provider.reconcile) continue;
      const active = await this.replicas.find({ where: { provider: provider.kind, status: ACTIVE } });
      try {
        const gone = await provider.reconcile(active);
        await this.end(active.filter((replica) => gone.includes(replica.id)), `its ${provider.kind} capacity was gone when the server started: replaced`);
      } catch (error) {
        this.logger.error({ err: error, provider: provider.kind }, 'could not reconcile the provider\'s replicas');
      }
    }
    for (const deployment of await this.deployments.listActive()) {
      if (deployment.status === 'Paused') continue;
      try {
        const restarting = ['local', 'market'].includes(deployment.provider) && deployment.status === 'Running'
          && orphans.some((replica) => replica.deploymentId === deployment.id)
          ? await this.deployments.transition(deployment, 'Creating', 'restarting replicas after a server restart')
          : deployment;
        await this.ensure(restarting);
      } catch (error) {
        this.logger.error({ err: error, deploymentId: deployment.id }, 'could not place replicas');
      }
    }
  }

  private async place(deploymentId: string, load: ReplicaLoad): Promise<void> {
    let deployment = await this.deployments.find(deploymentId);
    if (!deployment || !isServing(deployment)) return;
    const provider = this.providers.get(deployment.provider);
    if (!provider) {
      // external: agents join by themselves; any other kind is one this server was not configured for.
      const reason = `waiting for the ${deployment.provider} provider, which this server does not run (see the README's configuration)`;
      if (deployment.provider !== 'external' && deployment.statusReason !== reason) await this.deployments.transition(deployment, deployment.status, reason);
      return;
    }
    const model = this.catalog.get(deployment.modelId);
    const active = await this.listActive(deployment.id);
    const wanted = wantedReplicas(deployment);
    if (wanted === 0) {
      await this.scaleToZero(deployment, active);
      return;
    }
    // The first replica after a stay at zero: the deployment says why its requests wait.
    if (deployment.statusReason === SCALED_TO_ZERO_REASON) deployment = await this.deployments.transition(deployment, 'Running', COLD_START_REASON);
    for (let count = active.length; count < wanted; count++) {
      const hold = provider.holdReason?.(deployment.id) ?? await this.startHold(deployment.id);
      if (hold) {
        const reason = `${count} of ${wanted} replicas placed; ${hold}`;
        if (deployment.statusReason !== reason) await this.deployments.transition(deployment, deployment.status, reason);
        return;
      }
      const choice = await chooseOffer(provider, deployment, model);
      if (!choice.offer) {
        await this.deployments.transition(deployment, deployment.status, `${active.length === 0 && count === 0 ? '' : `${count} of ${wanted} replicas placed; `}${choice.reason}`);
        return;
      }
      const joinToken = newSecret('jt-');
      const offer = choice.offer;
      const row = this.replicas.create({
        id: newId('rep'), deploymentId: deployment.id, status: 'Creating', statusReason: `starting on ${offer.gpuName} (${offer.region})`,
        provider: provider.kind, joinTokenHash: hashSecret(joinToken), gpus: [], offerId: offer.id, gpuName: offer.gpuName,
        gpuMemoryGb: offer.gpuMemoryGb, region: offer.region, pricePerHour: offer.pricePerHour, loadPercent: 0, meteredUntil: null,
        priorityScheduling: deployment.shareIdleCapacity, serverId: this.serverId, startupPhases: [], startFailure: null,
      });
      let replica: Replica;
      try {
        replica = await this.insertWithin(row, deployment, provider.kind);
      } catch (error) {
        if (!(error instanceof AppError)) throw error;
        const reason = `${count} of ${wanted} replicas placed; ${error.message}; ${WAITING_FOR_CAPACITY} capacity`;
        if (deployment.statusReason !== reason) await this.deployments.transition(deployment, deployment.status, reason);
        return;
      }
      try {
        await provider.launch(offer, deployment, replica, joinToken);
      } catch (error) {
        await this.metering.leaveRunning([replica.id], 'Terminated', `could not launch on ${offer.id}: ${(error as Error).message}`);
        this.logger.warn({ err: error, deploymentId: deployment.id, offer: offer.id }, 'launch failed; placement retries on the next pass');
        return;
      }
    }
    if (active.length > wanted) await this.shrink(active, active.length - wanted, load);
    // Every wanted replica is placed: a placement problem the deployment showed is over.
    deployment = (await this.deployments.find(deployment.id)) ?? deployment;
    if (deployment.statusReason?.includes(WAITING_FOR_CAPACITY)) {
      await this.deployments.transition(deployment, deployment.status, deployment.status === 'Creating' ? 'replicas starting' : null);
    }
  }

  /**
   * Every replica goes (they drain: what runs finishes) and the deployment stays `Running`,
   * saying so: its next request waits while a replica starts. With no replica, nothing is billed.
   */
  private async scaleToZero(deployment: Deployment, active: Replica[]): Promise<void> {
    if (active.length > 0) await this.end(active, `scaled to zero after ${deployment.scaleToZeroAfterSeconds} s without requests`);
    if (deployment.status !== 'Running' || deployment.statusReason !== SCALED_TO_ZERO_REASON) {
      await this.deployments.transition(deployment, 'Running', SCALED_TO_ZERO_REASON);
    }
  }

  /** A new replica's row, inserted only if the tenant budget allows it (counted and inserted in one transaction). */
  private async insertWithin(row: Replica, deployment: Deployment, provider: string): Promise<Replica> {
    const quota = this.quota;
    if (!quota) return await this.replicas.save(row);
    return await this.dataSource.transaction(async (manager) => {
      await quota.hold(manager, deployment, provider);
      return await manager.getRepository(Replica).save(row);
    });
  }

  /** Gives up `count` replicas: ones still starting first, then the least loaded (they drain, then stop). */
  private async shrink(active: Replica[], count: number, load: ReplicaLoad): Promise<void> {
    const victims = [...active]
      .sort((left, right) => Number(left.status === 'Running') - Number(right.status === 'Running') || load(left.id) - load(right.id)
        || right.createdAt.getTime() - left.createdAt.getTime())
      .slice(0, count);
    await this.end(victims, 'scaled down');
  }

  private async externalReplica(deployment: Deployment, tokenHash: string, hello: Hello): Promise<Replica | null> {
    const agentTokenHash = hashSecret(`${tokenHash}:${hello.agentId}`);
    const existing = await this.replicas.findOne({ where: { joinTokenHash: agentTokenHash } });
    if (existing && existing.status !== 'Terminated') return existing;
    if ((await this.listActive(deployment.id)).length >= deployment.maxReplicas) return null;
    if (existing) await this.replicas.delete({ id: existing.id });
    return await this.replicas.save(this.replicas.create({
      id: newId('rep'), deploymentId: deployment.id, status: 'Creating', statusReason: null,
      provider: 'external', joinTokenHash: agentTokenHash, gpus: [], pricePerHour: 0, meteredUntil: null, startupPhases: [], startFailure: null,
    }));
  }
}

function isServing(deployment: Deployment): boolean {
  return deployment.status === 'Creating' || deployment.status === 'Running';
}
