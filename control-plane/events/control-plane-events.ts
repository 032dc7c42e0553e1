import { EventEmitter } from 'node:events';

export interface ReplicaLoad {
  replicaId: string;
  deploymentId: string;
  workspaceId: string;
  inFlight: number;
  queued: number;
  engineHealth: string;
  at: Date;
  /** Mean ms from dispatch to first output / to completion of this replica's jobs since its previous report; null when none. */
  firstOutputMs: number | null;
  completionMs: number | null;
  /** Jobs completed since its previous report. */
  completed: number;
  /**
   * What the engine itself reports (Heartbeat.engine_signals): requests running and waiting in
   * the engine, KV-cache use and prefix-cache hit rate (0–1); null when it reports none (the
   * hit rate also before the engine gave one).
   */
  engineRunning: number | null;
  engineWaiting: number | null;
  kvCacheUsage: number | null;
  prefixCacheHitRate: number | null;
}

/**
 * The events, by name, with their arguments. The bus is core and names no module above it: each
 * module declares the events it emits from its own file, by adding to this interface
 * (TypeScript declaration merging), e.g. in deployments/deployment-store.ts:
 *
 *   declare module '../events/control-plane-events' {
 *     interface ControlPlaneEventMap { deploymentUpdated: [Deployment] }
 *   }
 *
 * Declared so: deploymentUpdated (deployments/deployment-store.ts), requestUpdated
 * (requests/request-records.ts), webhookAttemptLogged (webhooks/webhook-delivery-loop.ts),
 * sharedModelUpdated (sharing/shared-pool.ts), batchUpdated (batches/batch-store.ts).
 */
export interface ControlPlaneEventMap {
  /** A replica's agent reported its load (every heartbeat; emitted on the server it is connected to, and re-emitted on the others by cluster/event-bridge.ts). */
  replicaLoad: [ReplicaLoad];
}

/**
 * In-process notifications from the control plane to its edges (GraphQL subscriptions).
 * With several server instances on one database, other servers' events arrive over PostgreSQL
 * LISTEN/NOTIFY (ClusterNotifier, cluster-notifier.ts): request and replica-load events are
 * published and re-emitted by cluster/event-bridge.ts, a changed deployment is re-read by the
 * deployment store and a logged webhook attempt by the webhook module when notified, and each
 * server recomputes shared-model availability itself. No Redis is involved.
 */
export class ControlPlaneEvents extends EventEmitter<ControlPlaneEventMap> {}
