import type { DeploymentScalingPolicy } from './scaling-policy-names';
import type { RoutingPolicyName } from '../placement/placement-policy';
import { Column, CreateDateColumn, Entity, Index, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import { numeric } from '../database/numeric-column';

export const DEPLOYMENT_STATUSES = ['Creating', 'Running', 'Paused', 'Deleted'] as const;
export type DeploymentStatus = (typeof DEPLOYMENT_STATUSES)[number];

/**
 * Where a deployment's replicas come from: agents spawned on this host (`local`), a rented-GPU
 * marketplace (`market`), operator-registered hosts (`static`), or agents that join with the
 * deployment's token (`external`).
 */
/**
 * Where opening idle capacity to guests stands: `activating` while the rolling restart turns
 * on priority scheduling replica by replica ("Sharing: Activating..."), `shared` once every
 * replica runs with it (the "Shared" badge). Turning sharing off is `not_shared` at once.
 */
export const SHARING_STATES = ['not_shared', 'activating', 'shared'] as const;
export type SharingState = (typeof SHARING_STATES)[number];

export const PROVIDER_KINDS = ['local', 'market', 'static', 'external', 'kubernetes'] as const;
export type ProviderKind = (typeof PROVIDER_KINDS)[number];


/** One model served at its own endpoint (`/d/<slug>/v1`). */
@Entity('deployments')
export class Deployment {
  @PrimaryColumn('text') id: string;
  @Index() @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'model_id' }) modelId: string;
  @Index({ unique: true }) @Column('text') slug: string;
  @Column('text') status: DeploymentStatus;
  /** Why the deployment is in its status (e.g. waiting for capacity); null when nothing to say. */
  @Column('text', { name: 'status_reason', nullable: true }) statusReason: string | null;
  @Column('numeric', { name: 'price_cap_per_hour', precision: 12, scale: 4, transformer: numeric }) priceCapPerHour: number;
  @Column('integer', { name: 'min_replicas' }) minReplicas: number;
  @Column('integer', { name: 'max_replicas' }) maxReplicas: number;
  /** Replicas the deployment should have now: min when autoscale is off, else the autoscaler's choice within [min, max]. */
  @Column('integer', { name: 'desired_replicas' }) desiredReplicas: number;
  @Column('boolean') autoscale: boolean;
  @Column('text') provider: ProviderKind;
  /** SHA-256 of the token external agents join with (null for local deployments). */
  @Index({ unique: true }) @Column('text', { name: 'join_token_hash', nullable: true }) joinTokenHash: string | null;
  /** Default output bucket of an image/video deployment (a verified storage credential); null = Managed. */
  @Column('integer', { name: 'storage_credential_id', nullable: true }) storageCredentialId: number | null;
  /** The owner's choice to open idle capacity to guests of shared serving. */
  @Column('boolean', { name: 'share_idle_capacity', default: false }) shareIdleCapacity: boolean;
  @Column('text', { default: 'not_shared' }) sharing: SharingState;
  /** How requests pick one of its replicas (placement/policies.ts). */
  @Column('text', { name: 'routing_policy', default: 'prefix-aware' }) routingPolicy: RoutingPolicyName;
  /** LoRA adapter slots per replica, ready in the engine at once (vLLM `--max-loras`); 0: no adapter is served (docs/adapters.md). */
  @Column('integer', { name: 'max_loras', default: 4 }) maxLoras: number;
  /** More adapters kept in host memory per replica (vLLM `--max-cpu-loras`). */
  @Column('integer', { name: 'max_cpu_loras', default: 0 }) maxCpuLoras: number;
  /** The largest LoRA rank its engines accept (vLLM `--max-lora-rank`). */
  @Column('integer', { name: 'max_lora_rank', default: 64 }) maxLoraRank: number;
  /** How the autoscaler decides (autoscaling/scaling-policy.ts): `concurrency` (the default) or `slo`. */
  @Column('text', { name: 'scaling_policy', default: 'concurrency' }) scalingPolicy: DeploymentScalingPolicy;
  /** The SLO, each a p95 in ms (null: not stated): TTFT and time per output token for text, queue wait for media. */
  @Column('integer', { name: 'slo_ttft_p95_ms', nullable: true }) sloTtftP95Ms: number | null;
  @Column('integer', { name: 'slo_tpot_p95_ms', nullable: true }) sloTpotP95Ms: number | null;
  @Column('integer', { name: 'slo_queue_wait_p95_ms', nullable: true }) sloQueueWaitP95Ms: number | null;
  /**
   * Scale to zero after this many seconds without a request (null: never below max(1, min)).
   * The contract keeps minReplicas at 1 or more; this is the opt-in that lets the count reach 0.
   */
  @Column('integer', { name: 'scale_to_zero_after_seconds', nullable: true }) scaleToZeroAfterSeconds: number | null;
  /** Requests that may wait at each gateway while a first replica starts; past it, 503 with Retry-After. */
  @Column('integer', { name: 'cold_start_queue_limit', default: 100 }) coldStartQueueLimit: number;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
