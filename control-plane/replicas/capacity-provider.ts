import type { GpuOffer } from './gpu-offer';
import type { Deployment, ProviderKind } from '../deployments/deployment.entity';
import type { Replica } from './replica.entity';

/**
 * Where replicas run: GPU capacity offered at a price. Placement picks an offer (the cheapest
 * that fits the model under the deployment's price cap) and launches a replica on it; the
 * provider starts an agent that dials back over gRPC with `joinToken`, and the replica turns
 * Running when that agent's engine is ready.
 */
export interface CapacityProvider {
  readonly kind: ProviderKind;
  /** What can be rented now, with prices (a marketplace's change over time). */
  offers(): Promise<GpuOffer[]>;
  launch(offer: GpuOffer, deployment: Deployment, replica: Replica, joinToken: string): Promise<void>;
  /** Stops the replica's agent (drain first) and frees its capacity; resolves when it has gone. */
  terminate(replicaId: string): Promise<void>;
  stopAll(): Promise<void>;
  /** Why the deployment should not get a new replica now (a back-off after failures), or null. */
  holdReason?(deploymentId: string): string | null;
  /**
   * On start-up, with the provider's replicas the database says are active: releases what no
   * active replica owns, and returns the ids of those whose capacity is gone (they are replaced).
   */
  reconcile?(active: readonly Replica[]): Promise<string[]>;
}

/** Told when a provider loses a replica's host for good (a reclaimed machine, a removed host). */
export type HostLostListener = (replicaId: string, reason: string) => void;

/**
 * Admission of a static host's agent, which joins with its host token: the host it names, and
 * the replica placed on it (null while the host is free). The static provider implements it.
 */
export interface HostTokens {
  hostByToken(tokenHash: string): Promise<{ name: string; replicaId: string | null } | null>;
  /** The host's agent said Hello with what its weights cache holds (placement prefers it for those models). */
  cachedModelsReported(tokenHash: string, models: readonly string[]): Promise<void>;
}
