import type { Deployment } from '../deployments/deployment.entity';
import type { Replica } from '../replicas/replica.entity';

/**
 * Where replicas run. The foundation ships `local` (agents spawned on this host); the
 * price-capped GPU providers implement the same contract. A provider starts an agent that
 * dials back over gRPC with `joinToken`; the replica turns Running when that agent says Hello.
 */
export interface CapacityProvider {
  readonly kind: string;
  launch(deployment: Deployment, replica: Replica, joinToken: string): Promise<void>;
  /** Stops the replica's agent (drain first); resolves when it has gone. */
  terminate(replicaId: string): Promise<void>;
  stopAll(): Promise<void>;
}
