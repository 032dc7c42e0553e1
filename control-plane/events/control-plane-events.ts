import { EventEmitter } from 'node:events';
import type { Deployment } from '../deployments/deployment.entity';
import type { RequestRecord } from '../requests/request-record.entity';

interface EventMap {
  deploymentUpdated: [Deployment];
  /** A request record changed status or progress (on this server). */
  requestUpdated: [RequestRecord];
}

/**
 * In-process notifications from the control plane to its edges (GraphQL subscriptions).
 * With several server instances this is bridged to Redis pub/sub at the edge.
 */
export class ControlPlaneEvents extends EventEmitter<EventMap> {}
