import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { AgentConnection } from '../dispatch/agent-connection';
import type { Dispatcher } from '../dispatch/dispatcher';
import { clusterSetting } from '../database/cluster-settings';
import type { SlotOffer } from '../placement/local-or-peer';
import { connectionAdapters } from './replica-adapters';
import { engineLoadOf } from '../dispatch/engine-load';

/** What one server's agents can take now, per deployment: the cluster's view of its replicas. */
export interface DeploymentLoad {
  /** Replicas taking work (ready, not draining). */
  ready: number;
  /** Slots free on them. */
  freeSlots: number;
  /** Owner jobs running (guests and batch lines excluded: they never drive the autoscaler) and jobs queued on the agents. */
  inFlight: number;
  queued: number;
  /** Requests waiting at this server for a first replica (scale to zero's bounded queue); absent from older servers. */
  waiting?: number;
  /** Replicas taking shared-serving guests (priority scheduling), and the guest slots idle on them. */
  guestReady: number;
  guestSlots: number;
  /** The highest KV-cache use (0–1) the engines of this server's replicas report; absent when none reports it (or from older servers). */
  kvCacheUsage?: number;
  /** The mean prefix-cache hit rate (0–1) over this server's replicas whose engines report one, and how many do. */
  prefixCacheHitRate?: number;
  prefixCacheReporting?: number;
  /** The deployment's owner traffic at this server (the `slo` autoscaler's inputs); absent from servers older than issue 39. */
  traffic?: DeploymentTraffic;
  /**
   * Each ready replica's load (owner and guest jobs running or waiting on it) and concurrency,
   * for routing that picks one replica across servers (prefix-aware, round-robin). Absent from
   * servers older than engine-aware routing.
   */
  replicas?: ReplicaLoad[];
}

/** One ready replica as its server publishes it to the others. */
export interface ReplicaLoad {
  id: string;
  load: number;
  capacity: number;
  /**
   * Its LoRA adapter slots (`Hello.max_loras`, `max_cpu_loras`) and the adapters it holds, by
   * `AdapterRef.name` and state (its latest heartbeat, at most `maxLoras` ready or loading and
   * `maxCpuLoras` in host memory): what another server's router places adapter jobs by. Absent
   * for replicas that serve no adapter, and from servers older than adapters.
   */
  maxLoras?: number;
  maxCpuLoras?: number;
  adapters?: { gpu: readonly string[]; cpu: readonly string[]; loading: readonly string[] };
}

/**
 * What one server saw of a deployment's owner requests (autoscaling/server-scaling-signals.ts):
 * counts that add up over servers, so the server that runs the autoscaler sees the cluster's.
 */
export interface DeploymentTraffic {
  /** Owner requests admitted at this server since it started (a counter: the leader takes its rate). */
  arrivals: number;
  /** When the last of them arrived (Unix ms); null before the first. */
  lastArrivalAt: number | null;
  /**
   * The last minute's TTFT (text: streamed owner requests) or queue wait (media), as
   * [bucket, count] pairs of metrics-history/latency-buckets.ts, the empty buckets left out.
   */
  latencyBuckets: Array<[number, number]>;
  /** The last minute's finished owner text requests and their prompt and completion tokens (the service model's mean lengths). */
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

export type ServerLoad = Record<string, DeploymentLoad>;

export interface Peer {
  id: string;
  relayAddress: string;
  load: ServerLoad;
}

/** A peer's offer for a job (placement/local-or-peer.ts): one of its deployments and the slots it reports free. */
export interface PeerOffer extends SlotOffer {
  readonly peer: Peer;
  readonly deploymentId: string;
}

/**
 * What this server knows of its deployments' demand beyond its agents' jobs, published with its
 * load so the server running the capacity loop sees every server's: the requests waiting here
 * for a first replica (the cold-start queue). Arrivals are published as `traffic`.
 */
export interface LocalDemand {
  /** Calls `visit` for each deployment with requests waiting here. */
  forEachDeployment(visit: (deploymentId: string, waiting: number) => void): void;
}

export interface ServerRegistryOptions {
  /** How often this server writes its row (liveness and load) and reads its peers'. @default 1000 */
  heartbeatIntervalMs: number;
  /** A server whose row is older than this is gone: its replicas are ended and nothing is relayed to it. @default 5000 */
  serverTimeoutMs: number;
}

/**
 * This server's row in `servers` (where peers relay jobs to it, and the load of the replicas
 * whose agent streams it holds), rewritten every heartbeat, and the live peers' rows read
 * back. A crashed server's row goes stale and it drops out of every peer's view within
 * `serverTimeoutMs`; a stopping one deletes its row.
 */
export class ServerRegistry {
  private timer: NodeJS.Timeout | undefined;
  private livePeers: Peer[] = [];
  private beating: Promise<void> | null = null;
  private readonly peerListeners: Array<() => void> = [];

  constructor(
    private readonly dataSource: DataSource,
    readonly serverId: string,
    private readonly relayAddress: string,
    private readonly dispatcher: Dispatcher,
    readonly options: ServerRegistryOptions,
    private readonly logger: Logger,
    /** Guest slots idle on one of this server's replicas (the shared pool's rule). */
    private readonly guestSlots: (connection: AgentConnection) => number = () => 0,
    /** This server's owner traffic per deployment; absent: none published. */
    private readonly traffic: () => Record<string, DeploymentTraffic> = () => ({}),
    /** Requests waiting here for a first replica; none: only the agents' load is published. */
    private readonly demand: LocalDemand | null = null,
  ) {}

  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => {
      if (!this.beating) this.beating = this.beat().finally(() => (this.beating = null));
    }, this.options.heartbeatIntervalMs);
    this.timer.unref();
  }

  /** Called after each heartbeat that read the peers' rows (their replicas may have changed). */
  onPeers(listener: () => void): void {
    this.peerListeners.push(listener);
  }

  /** Live peers as of the last heartbeat (at most one interval old). */
  peers(): readonly Peer[] {
    return this.livePeers;
  }

  /** Ids of every live server, this one included (read now, for decisions that end replicas). */
  async liveServerIds(): Promise<Set<string>> {
    const rows: Array<{ id: string }> = await this.dataSource.query(
      `SELECT id FROM servers WHERE last_seen_at > statement_timestamp() - $1 * interval '1 millisecond'`, [this.options.serverTimeoutMs]);
    return new Set([this.serverId, ...rows.map((row) => row.id)]);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.beating;
    await this.dataSource.query('DELETE FROM servers WHERE id = $1', [this.serverId]).catch((error) =>
      this.logger.warn({ err: error }, 'could not remove this server\'s row; peers drop it once it is stale'));
  }

  /** The load of the replicas whose agents this server holds, from its dispatcher. */
  loadSnapshot(): ServerLoad {
    const load: ServerLoad = {};
    for (const connection of this.dispatcher.connections()) {
      if (connection.draining || connection.closed) continue;
      const entry = load[connection.deploymentId] ??= { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, replicas: [] };
      entry.ready++;
      // What a live job relayed here would find: a preemptible batch line's slot counts as free.
      const replica: ReplicaLoad = { id: connection.replicaId, load: connection.liveBusy + connection.reserved, capacity: connection.maxConcurrency };
      if (connection.maxLoras > 0) {
        replica.maxLoras = connection.maxLoras;
        replica.maxCpuLoras = connection.maxCpuLoras;
        replica.adapters = connectionAdapters(connection);
      }
      entry.replicas!.push(replica);
      entry.freeSlots += Math.max(0, connection.liveFreeSlots);
      entry.inFlight += connection.ownerInFlight;
      entry.queued += connection.heartbeat?.queued ?? 0;
      if (connection.priorityScheduling) {
        entry.guestReady++;
        entry.guestSlots += this.guestSlots(connection);
      }
      const engine = engineLoadOf(connection.engineSignals);
      if (engine.kvCacheUsage !== null) entry.kvCacheUsage = Math.max(entry.kvCacheUsage ?? 0, engine.kvCacheUsage);
      if (engine.prefixCacheHitRate !== null) {
        const reporting = (entry.prefixCacheReporting ?? 0) + 1;
        entry.prefixCacheHitRate = ((entry.prefixCacheHitRate ?? 0) * (reporting - 1) + engine.prefixCacheHitRate) / reporting;
        entry.prefixCacheReporting = reporting;
      }
    }
    // A deployment with no replica here still has traffic here (scale to zero: its first replica is starting).
    for (const [deploymentId, traffic] of Object.entries(this.traffic())) {
      (load[deploymentId] ??= { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, replicas: [] }).traffic = traffic;
    }
    // A deployment at zero replicas has no connection here, but may have requests waiting for one.
    this.demand?.forEachDeployment((deploymentId, waiting) => {
      (load[deploymentId] ??= { ready: 0, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, replicas: [] }).waiting = waiting;
    });
    return load;
  }

  private async beat(): Promise<void> {
    try {
      await this.dataSource.query(`
        INSERT INTO servers (id, relay_address, load) VALUES ($1, $2, $3)
        ON CONFLICT (id) DO UPDATE SET last_seen_at = statement_timestamp(), load = EXCLUDED.load, relay_address = EXCLUDED.relay_address`,
      [this.serverId, this.relayAddress, JSON.stringify(this.loadSnapshot())]);
      const rows: Array<{ id: string; relay_address: string; load: ServerLoad }> = await this.dataSource.query(`
        SELECT id, relay_address, load FROM servers
        WHERE id <> $1 AND last_seen_at > statement_timestamp() - $2 * interval '1 millisecond'`, [this.serverId, this.options.serverTimeoutMs]);
      this.livePeers = rows.map((row) => ({ id: row.id, relayAddress: row.relay_address, load: row.load }));
      for (const listener of this.peerListeners) listener();
    } catch (error) {
      // Peers keep relaying to what they last saw; a database outage heals on the next beat.
      this.logger.warn({ err: error }, 'server heartbeat failed');
    }
  }
}

/** The cluster's relay token: made once by whichever server starts first, read by the others. */
export async function relayToken(dataSource: DataSource, candidate: string): Promise<string> {
  return await clusterSetting(dataSource, 'relay_token', candidate);
}
