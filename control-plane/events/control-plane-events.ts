import { EventEmitter } from 'node:events';
import type { Deployment } from '../deployments/deployment.entity';
import type { SharedModel } from '../sharing/shared-pool';
import type { RequestRecord } from '../requests/request-record.entity';
import type { WebhookAttempt } from '../webhooks/webhook.entities';

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
}

interface EventMap {
  deploymentUpdated: [Deployment];
  /** A request record changed status or progress (on this server, or on another one: re-emitted by event-bridge.ts). */
  requestUpdated: [RequestRecord];
  /** A replica's agent reported its load (every heartbeat; emitted on the server it is connected to, and re-emitted on the others by event-bridge.ts). */
  replicaLoad: [ReplicaLoad];
  /** A webhook delivery attempt was logged (on any server: relayed by the cluster notifier). */
  webhookAttemptLogged: [WebhookAttempt];
  /** A shared model's availability changed (recomputed every SHARED_AVAILABILITY_INTERVAL_MS on each server). */
  sharedModelUpdated: [SharedModel];
}

/**
 * In-process notifications from the control plane to its edges (GraphQL subscriptions).
 * With several server instances on one database, other servers' events arrive over PostgreSQL
 * LISTEN/NOTIFY (ClusterNotifier, cluster-notifier.ts): request and replica-load events are
 * published and re-emitted by event-bridge.ts, a changed deployment is re-read by the
 * deployment store and a logged webhook attempt by the webhook module when notified, and each
 * server recomputes shared-model availability itself. No Redis is involved.
 */
export class ControlPlaneEvents extends EventEmitter<EventMap> {}
