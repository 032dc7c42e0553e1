import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';

/** One autoscaler decision with every input it used: what users see to understand why they scaled (or did not). */
@Entity('scaling_decisions')
export class ScalingDecisionRecord {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('timestamptz', { name: 'decided_at' }) decidedAt: Date;
  @Column('text') action: 'scale_up' | 'scale_down' | 'hold';
  @Column('text') reason: string;
  @Column('text') explanation: string;
  /** The smoothed in-flight + queued work the decision was made on. */
  @Column('double precision') signal: number;
  @Column('integer', { name: 'target_concurrency' }) targetConcurrency: number;
  @Column('integer', { name: 'current_replicas' }) currentReplicas: number;
  @Column('integer', { name: 'wanted_replicas' }) wantedReplicas: number;
  @Column('integer', { name: 'desired_replicas' }) desiredReplicas: number;
  /** The raw observation and settings (in-flight, queued, ready replicas, min/max, capacity limit). */
  @Column('jsonb') inputs: Record<string, unknown>;
  /** The policy that decided (`concurrency`, `slo`); null on rows from before policies existed (`concurrency`). */
  @Column('text', { nullable: true }) policy: string | null;
  /** The input that moved the decision (scaling-decision.ts `movedBy`). */
  @Column('text', { name: 'moved_by', nullable: true }) movedBy: string | null;
  /** The arrival rate (req/s) the policy forecast one start-up ahead; null when it does not forecast. */
  @Column('double precision', { name: 'forecast_arrivals_per_second', nullable: true }) forecastArrivalsPerSecond: number | null;
  /** Owner arrivals per second over every server, as observed for the decision; null when not measured. */
  @Column('double precision', { name: 'arrivals_per_second', nullable: true }) arrivalsPerSecond: number | null;
}
