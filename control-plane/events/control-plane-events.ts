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
  /** A request record changed status or progress (on this server). */
  requestUpdated: [RequestRecord];
  /** A replica's agent reported its load (every heartbeat, on the server it is connected to). */
  replicaLoad: [ReplicaLoad];
  /** A webhook delivery attempt was logged (on any server: relayed by the cluster notifier). */
  webhookAttemptLogged: [WebhookAttempt];
  /** A shared model's availability changed (recomputed every SHARED_AVAILABILITY_INTERVAL_MS on each server). */
  sharedModelUpdated: [SharedModel];
}

/**
 * In-process notifications from the control plane to its edges (GraphQL subscriptions).
 * With several server instances this is bridged to Redis pub/sub at the edge.
 */
export class ControlPlaneEvents extends EventEmitter<EventMap> {}
