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
}
