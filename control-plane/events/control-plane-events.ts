import { EventEmitter } from 'node:events';
import type { Deployment } from '../deployments/deployment.entity';

interface EventMap {
  deploymentUpdated: [Deployment];
}

/**
 * In-process notifications from the control plane to its edges (GraphQL subscriptions).
 * With several server instances this is bridged to Redis pub/sub at the edge.
 */
export class ControlPlaneEvents extends EventEmitter<EventMap> {}
