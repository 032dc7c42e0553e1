import { Column, CreateDateColumn, Entity, Index, PrimaryColumn } from 'typeorm';
import { nullableNumeric, numeric } from '../database/numeric-column';

export const REPLICA_STATUSES = ['Creating', 'Running', 'Unhealthy', 'Terminated'] as const;
export type ReplicaStatus = (typeof REPLICA_STATUSES)[number];

/**
 * Why a replica never became ready (it was replaced, with back-off: replica-start-watchdog.ts):
 * `deadline`, no ready engine within REPLICA_START_DEADLINE_MS of its placement; `exited`, its
 * agent or engine exited while starting; `provider_failed`, its provider says it cannot come
 * (an image that cannot be pulled, a crash loop).
 */
export const START_FAILURE_REASONS = ['deadline', 'exited', 'provider_failed'] as const;
export type StartFailureReason = (typeof START_FAILURE_REASONS)[number];

/**
 * One phase of a replica's start-up as stored: `provision` (placement to its agent's Hello:
 * a process spawned, a pod scheduled and its images pulled), then what its agent timed
 * (`download`, `load`, `warm_up`: proto/PROTOCOL.md "Start-up phases").
 */
export interface StoredStartupPhase {
  readonly name: string;
  /** ISO 8601. */
  readonly startedAt: string;
  readonly durationMs: number;
  /** False: the start-up was in this phase when last heard of (where it stuck, if it never became ready). */
  readonly done: boolean;
  readonly detail: string;
  /** The download phase: the model's bytes; 0 otherwise. */
  readonly bytes: number;
}


/** One running copy of a deployment's model: a worker agent and its engine on one host. */
@Entity('replicas')
export class Replica {
  @PrimaryColumn('text') id: string;
  @Index() @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text') status: ReplicaStatus;
  @Column('text', { name: 'status_reason', nullable: true }) statusReason: string | null;
  @Column('text') provider: string;
  /** SHA-256 of the join token the replica's agent presents in Hello. */
  @Index({ unique: true }) @Column('text', { name: 'join_token_hash' }) joinTokenHash: string;
  @Column('text', { name: 'agent_id', nullable: true }) agentId: string | null;
  @Column('text', { name: 'agent_version', nullable: true }) agentVersion: string | null;
  @Column('text', { name: 'engine_kind', nullable: true }) engineKind: string | null;
  @Column('text', { name: 'engine_version', nullable: true }) engineVersion: string | null;
  @Column('integer', { name: 'max_concurrency', nullable: true }) maxConcurrency: number | null;
  @Column('jsonb', { default: () => "'[]'" }) gpus: Array<{ name: string; memoryBytes: number; index: number }>;
  /** The capacity offer the replica was placed on, and what it costs (null for external agents). */
  @Column('text', { name: 'offer_id', nullable: true }) offerId: string | null;
  @Column('text', { name: 'gpu_name', nullable: true }) gpuName: string | null;
  @Column('numeric', { name: 'gpu_memory_gb', precision: 8, scale: 2, nullable: true, transformer: nullableNumeric }) gpuMemoryGb: number | null;
  @Column('text', { nullable: true }) region: string | null;
  @Column('numeric', { name: 'price_per_hour', precision: 12, scale: 4, transformer: numeric }) pricePerHour: number;
  /** Model download / load progress the agent reported while its engine starts (0–100). */
  @Column('integer', { name: 'load_percent', nullable: true }) loadPercent: number | null;
  /** Placed for shared serving: its agent is welcomed with priority scheduling (owner jobs first, guests in idle slots) if its engine can. */
  @Column('boolean', { name: 'priority_scheduling', default: false }) priorityScheduling: boolean;
  /** The server that holds (local agents: spawned) the replica's agent stream; peers relay its jobs there. */
  @Column('text', { name: 'server_id', nullable: true }) serverId: string | null;
  /** Billed up to here; the metering loop moves it forward while the replica runs. */
  @Column('timestamptz', { name: 'metered_until', nullable: true }) meteredUntil: Date | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  /** When its engine first reported ready: the end of its cold start (null while it never was). */
  @Column('timestamptz', { name: 'started_at', nullable: true }) startedAt: Date | null;
  /** Its start-up, phase by phase, as last reported (final once it is ready). */
  @Column('jsonb', { name: 'startup_phases', default: () => "'[]'" }) startupPhases: StoredStartupPhase[];
  /** Set when it was ended for never becoming ready; counted on the deployment. */
  @Column('text', { name: 'start_failure', nullable: true }) startFailure: StartFailureReason | null;
  @Column('timestamptz', { name: 'last_seen_at', nullable: true }) lastSeenAt: Date | null;
  @Column('timestamptz', { name: 'terminated_at', nullable: true }) terminatedAt: Date | null;
}
