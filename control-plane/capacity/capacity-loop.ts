import type { DataSource, Repository } from 'typeorm';
import type { Logger } from 'pino';
import { shouldRecord } from '../autoscaling/decision-recording';
import { withScaleToZero, type ScaleToZeroState } from '../autoscaling/scale-to-zero';
import type { ScalingDecision } from '../autoscaling/scaling-decision';
import type { ScalingObservation } from '../autoscaling/scaling-observation';
import type { ScalingPolicies } from '../autoscaling/scaling-policies';
import type { ScalingPolicyName } from '../autoscaling/scaling-policy';
import type { ClusterScalingSignals } from '../autoscaling/cluster-scaling-signals';
import { serviceModelOf } from '../autoscaling/catalog-service-model';
import { sloOf } from '../deployments/scaling-settings';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';
import type { DeploymentService } from '../deployments/deployment.service';
import type { DeploymentStore } from '../deployments/deployment-store';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { CapacityProvider } from '../replicas/capacity-provider';
import type { ReplicaManager } from '../replicas/replica-manager';
import type { ReplicaStartWatchdog } from '../replicas/replica-start-watchdog';
import type { RequestRecords } from '../requests/request-records';
import { ScalingDecisionRecord } from './scaling-decision.entity';
import { AppError } from '../errors/app-error';
import type { SharingRollout } from '../sharing/sharing-rollout';
import type { DeploymentLoad } from '../cluster/server-registry';

export interface CapacityLoopOptions {
  intervalMs: number;
  /** An Unhealthy replica (agent gone) is replaced after this. */
  replicaLostGraceMs: number;
}

export interface CapacityLoopDependencies {
  dataSource: DataSource;
  deployments: DeploymentStore;
  deploymentService: DeploymentService;
  replicas: ReplicaManager;
  dispatcher: Dispatcher;
  requestRecords: RequestRecords;
  providers: ReadonlyMap<string, CapacityProvider>;
  catalog: Catalog;
  /** Each deployment runs the policy its `scalingPolicy` names. */
  policies: ScalingPolicies;
  /** Arrivals, idle time, KV-cache use and the last minute's p95 over every server; absent: the observations carry none of them. */
  signals?: Pick<ClusterScalingSignals, 'observe' | 'forget'>;
  /** Told about every recorded decision (the autoscaler-decisions metric). */
  onDecision?: (decision: ScalingDecision) => void;
  /** The rolling restart of deployments being opened to guests. */
  sharingRollout?: SharingRollout;
  /** Servers alive on the database now; the replicas of any other are ended (their agents went with them). */
  liveServers?: () => Promise<ReadonlySet<string>>;
  /**
   * A deployment's replicas as every server sees them (the autoscaler's signal), with the
   * requests waiting at each for a first replica and the last request's arrival; without it,
   * this server's agents only.
   */
  loadOf?: (deploymentId: string) => DeploymentLoad;
  /** Whether the deployment has a batch in progress: work that must not be stranded at zero replicas. */
  openBatch?: (deploymentId: string) => Promise<boolean>;
  logger: Logger;
  /** The clock in milliseconds the autoscaler decides by and lost replicas are timed on. @default Date.now */
  now?: () => number;
  /** Replaces replicas that never become ready (start-up deadline), before placement runs. */
  startWatchdog?: Pick<ReplicaStartWatchdog, 'check'>;
}

/** The loop's memory of one deployment: the state of the policy it runs (a policy change starts a fresh one). */
interface PolicyMemory {
  policy: ScalingPolicyName;
  state: ScaleToZeroState<unknown>;
  lastRecorded: ScalingDecision | null;
  /** A deployment set to a policy this server lacks has been logged once. */
  fallbackLogged: boolean;
  /** When it was last active as far as this loop knows (scale to zero's idle clock). */
  activeAt: number;
}

/** A server's word that requests wait for a first replica counts this long (its registry row says so within a heartbeat). */
const ANNOUNCEMENT_FRESH_MS = 10_000;

/** Advisory-lock key: one server at a time runs the loop. */
const LOOP_LOCK = 'capacity-loop';

/**
 * Every few seconds, per deployment: replace replicas whose host is gone, take the rolling
 * restart for sharing one step further, ask the deployment's scaling policy
 * how many replicas the load needs (recording its decision with every input), and have
 * placement reach that count on the cheapest offers under the price cap, retrying what could
 * not be placed (a marketplace's offers change). Woken early when offers change.
 */
export class CapacityLoop {
  private readonly states = new Map<string, PolicyMemory>();
  /** Deployments a server said have requests waiting for a first replica, and when; not yet decided on. */
  private readonly coldStarts = new Map<string, number>();
  private readonly decisions: Repository<ScalingDecisionRecord>;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private readonly now: () => number;

  constructor(private readonly dependencies: CapacityLoopDependencies, private readonly options: CapacityLoopOptions) {
    this.now = dependencies.now ?? Date.now;
    this.decisions = dependencies.dataSource.getRepository(ScalingDecisionRecord);
  }

  start(): void {
    this.timer = setInterval(() => this.wake(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** Runs a pass now (coalesced with one already running). */
  wake(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runOnce().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /**
   * A request started waiting for a first replica of the deployment (here, or on a peer that
   * said so): decided now, not at the next interval, and counted as waiting even before that
   * server's registry row says so.
   */
  coldStart(deploymentId: string): void {
    this.coldStarts.set(deploymentId, this.now());
    this.wake();
  }

  /** One pass over every deployment (tests call it to step the loop). */
  async runOnce(): Promise<void> {
    try {
      await this.dependencies.dataSource.transaction(async (manager) => {
        const [{ locked }] = await manager.query('SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked', [LOOP_LOCK]);
        if (!locked) return;
        // The leader's duty: what a silent server held is ended here, whichever server that was.
        const liveServers = await this.dependencies.liveServers?.();
        if (liveServers) await this.dependencies.replicas.serversGone(liveServers);
        const deployments = await this.dependencies.deployments.listActive();
        // The autoscaler's memory of a deployment that is gone (deleted) goes with it.
        const live = new Set(deployments.map((deployment) => deployment.id));
        for (const id of this.states.keys()) {
          if (live.has(id)) continue;
          this.states.delete(id);
          this.dependencies.signals?.forget(id);
        }
        for (const deployment of deployments) {
          if (this.stopped) return;
          if (deployment.status !== 'Creating' && deployment.status !== 'Running') continue;
          if (!this.dependencies.providers.has(deployment.provider)) continue;
          await this.reconcile(deployment).catch((error) => this.dependencies.logger.error({ err: error, deploymentId: deployment.id }, 'capacity pass failed for a deployment'));
        }
      });
    } catch (error) {
      this.dependencies.logger.error({ err: error }, 'capacity pass failed');
    }
  }

  private async reconcile(deployment: Deployment): Promise<void> {
    const { replicas, dispatcher } = this.dependencies;
    const cutoff = this.now() - this.options.replicaLostGraceMs;
    const load = (replicaId: string) => dispatcher.connections(deployment.id).find((connection) => connection.replicaId === replicaId)?.load ?? 0;
    for (const replica of await replicas.listActive(deployment.id)) {
      if (replica.status === 'Unhealthy' && (replica.lastSeenAt?.getTime() ?? 0) < cutoff) {
        await replicas.hostLost(replica.id, `its agent was gone for more than ${Math.round(this.options.replicaLostGraceMs / 1000)} s: replaced`, load);
      }
    }
    await this.dependencies.startWatchdog?.check(deployment);
    await this.dependencies.sharingRollout?.step(deployment);
    const scaled = await this.autoscale(deployment);
    await replicas.ensure(scaled, load);
  }

  private async autoscale(deployment: Deployment): Promise<Deployment> {
    const { dispatcher, catalog, requestRecords, deploymentService } = this.dependencies;
    const now = this.now();
    const model = catalog.get(deployment.modelId);
    const connections = dispatcher.connections(deployment.id);
    const active = await this.dependencies.replicas.listActive(deployment.id);
    const mediaQueued = model.modality === 'text' ? 0 : await requestRecords.countQueued(deployment.id);
    const { policy: chosen, fallback } = this.dependencies.policies.get(deployment.scalingPolicy);
    // Every policy may reach zero where the deployment opted in (scale-to-zero.ts); the wrapper keeps the policy's name.
    const policy = withScaleToZero(chosen);
    let entry = this.states.get(deployment.id);
    if (!entry || entry.policy !== policy.name) {
      // A new deployment, or its policy changed: the new policy starts from nothing, as after a restart.
      // Idle time runs from the cluster's last arrival (whose signals count from the leader's first
      // look when none is known); without signals, a deployment first seen now counts as active now.
      entry = {
        policy: policy.name, state: policy.newState(), lastRecorded: entry?.lastRecorded ?? null, fallbackLogged: false,
        activeAt: entry?.activeAt ?? (this.dependencies.signals ? 0 : now),
      };
      this.states.set(deployment.id, entry);
    }
    if (fallback && !entry.fallbackLogged) {
      entry.fallbackLogged = true;
      this.dependencies.logger.warn({ deploymentId: deployment.id, scalingPolicy: deployment.scalingPolicy },
        `this server has no '${deployment.scalingPolicy}' scaling policy: the deployment is scaled by '${policy.name}'`);
    }
    // Every server's agents (guests and batch lines excluded: they only fill idle slots and must not buy the owner replicas).
    const load = this.dependencies.loadOf?.(deployment.id) ?? {
      inFlight: connections.reduce((sum, connection) => sum + connection.ownerInFlight, 0),
      queued: connections.reduce((sum, connection) => sum + (connection.heartbeat?.queued ?? 0), 0),
      ready: connections.filter((connection) => connection.ready && !connection.draining).length,
      waiting: 0,
    };
    const signals = this.dependencies.signals?.observe(deployment.id, now);
    const scaleToZeroAfterMs = deployment.scaleToZeroAfterSeconds === null ? null : deployment.scaleToZeroAfterSeconds * 1000;
    // The waiting a server announced (coldStart) counts until its registry row shows it (a few
    // heartbeats; an older one, heard while another server ran the loop, is stale).
    const announcedAt = this.coldStarts.get(deployment.id);
    this.coldStarts.delete(deployment.id);
    const announced = announcedAt !== undefined && now - announcedAt < ANNOUNCEMENT_FRESH_MS;
    const waitingForReplica = Math.max(load.waiting ?? 0, signals?.waitingForReplica ?? 0, announced ? 1 : 0);
    // Active: a request arrived, runs, or waits (for a slot or a first replica); idle time runs from the last of these.
    const busy = waitingForReplica > 0 || load.inFlight + load.queued + mediaQueued > 0;
    const lastArrivalAt = signals ? now - signals.idleMs : 0;
    entry.activeAt = Math.max(entry.activeAt, lastArrivalAt, busy ? now : 0);
    let idleMs = now - entry.activeAt;
    // A batch in progress is work too (its lines are no one's in-flight requests): it keeps the
    // replicas, and at zero it starts one. Asked only where it can change the decision.
    const mayReachZero = scaleToZeroAfterMs !== null && (active.length === 0 || idleMs >= scaleToZeroAfterMs);
    const batchOpen = mayReachZero && (await this.dependencies.openBatch?.(deployment.id)) === true;
    if (batchOpen) {
      entry.activeAt = now;
      idleMs = 0;
    }
    const observation: ScalingObservation = {
      deploymentId: deployment.id,
      inFlight: load.inFlight,
      queued: load.queued + mediaQueued + (batchOpen && active.length === 0 ? 1 : 0),
      currentReplicas: active.length,
      readyReplicas: Math.min(active.length, load.ready),
      targetConcurrency: model.targetConcurrency,
      minReplicas: deployment.minReplicas, maxReplicas: deployment.maxReplicas, autoscale: deployment.autoscale,
      capacityLimit: await this.capacityLimit(deployment, active.length),
      slo: sloOf(deployment),
      serviceModel: serviceModelOf(model, signals),
      waitingForReplica, idleMs, scaleToZeroAfterMs,
      ...(signals ? {
        ...(signals.arrivalsPerSecond !== undefined ? { arrivalsPerSecond: signals.arrivalsPerSecond } : {}),
        kvCacheUsage: signals.kvCacheUsage, observedP95Ms: signals.observedP95Ms,
      } : {}),
    };
    const decision = policy.decide(entry.state, observation, now);
    // A cold start ordered now is activity: the replica it starts is not given back before the requests it is for reach it.
    if (decision.reason === 'cold_start') entry.activeAt = now;
    if (shouldRecord(entry.lastRecorded, decision)) {
      entry.lastRecorded = decision;
      await this.record(deployment, decision, observation);
    }
    return await deploymentService.setDesiredReplicas(deployment, decision.desiredReplicas);
  }

  /** Replicas the deployment could hold under its price cap: those it has plus what offers allow (null when unlimited). */
  private async capacityLimit(deployment: Deployment, current: number): Promise<number | null> {
    const provider = this.dependencies.providers.get(deployment.provider);
    if (!provider) return null;
    const model = this.dependencies.catalog.get(deployment.modelId);
    const placeable = (await provider.offers())
      .filter((offer) => offer.gpuMemoryGb >= model.gpuMemoryGb && offer.pricePerHour <= deployment.priceCapPerHour)
      .reduce((sum, offer) => sum + offer.available, 0);
    return Number.isFinite(placeable) ? current + placeable : null;
  }

  /** The deployment's recorded decisions, newest first (`limit` 1–500). */
  async recordedDecisions(deploymentId: string, limit: number): Promise<ScalingDecisionRecord[]> {
    if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new AppError('invalid_request', 'limit must be an integer from 1 to 500', { param: 'limit' });
    return await this.decisions.find({ where: { deploymentId }, order: { decidedAt: 'DESC', id: 'DESC' }, take: limit });
  }

  private async record(deployment: Deployment, decision: ScalingDecision, observation: ScalingObservation): Promise<void> {
    const inputs: Record<string, unknown> = {
      inFlight: decision.inFlight, queued: decision.queued, readyReplicas: decision.readyReplicas, perReplicaLoad: decision.perReplicaLoad,
      recommendedReplicas: decision.recommendedReplicas, minReplicas: decision.minReplicas, maxReplicas: decision.maxReplicas,
      autoscale: decision.autoscale, capacityLimit: decision.capacityLimit,
      // What the SLO policy and scale to zero read (absent: not measured).
      slo: observation.slo ?? null, kvCacheUsage: observation.kvCacheUsage, observedP95Ms: observation.observedP95Ms,
      waitingForReplica: observation.waitingForReplica, idleMs: observation.idleMs, scaleToZeroAfterMs: observation.scaleToZeroAfterMs,
    };
    const policy = decision.policy ?? 'concurrency';
    await this.decisions.save(this.decisions.create({
      deploymentId: deployment.id, workspaceId: deployment.workspaceId, decidedAt: new Date(decision.at), action: decision.action,
      reason: decision.reason, explanation: decision.explanation, signal: decision.signal, targetConcurrency: decision.targetConcurrency,
      currentReplicas: decision.currentReplicas, wantedReplicas: decision.wantedReplicas, desiredReplicas: decision.desiredReplicas,
      inputs, policy, movedBy: decision.movedBy ?? null,
      forecastArrivalsPerSecond: finiteOrNull(decision.forecastArrivalsPerSecond),
      arrivalsPerSecond: finiteOrNull(decision.arrivalsPerSecond ?? observation.arrivalsPerSecond),
    }));
    this.dependencies.onDecision?.({ ...decision, policy });
  }
}

function finiteOrNull(value: number | null | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}
