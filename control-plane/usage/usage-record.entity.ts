import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/** One metered chat/completion call: the source of TPD accounting and token billing. */
@Entity('usage_records')
@Index(['apiKeyId', 'createdAt'])
export class UsageRecord {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Index() @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'api_key_id' }) apiKeyId: string;
  /**
   * The deployment that ran the request: the caller's own, or for a guest the owner's deployment
   * that served it from the shared pool (never shown to the guest: its usage answers name
   * `sharedModel`). Null only on guest records written before it was recorded (migration
   * 1765500000000).
   */
  @Column('text', { name: 'deployment_id', nullable: true }) deploymentId: string | null;
  /** A guest's record: the shared model it called, `shared/<model-id>`; null on an owner's own. */
  @Column('text', { name: 'shared_model', nullable: true }) sharedModel?: string | null;
  @Column('text', { name: 'replica_id', nullable: true }) replicaId: string | null;
  @Column('text') endpoint: string;
  /** succeeded | failed | canceled */
  @Column('text') status: string;
  @Column('boolean') stream: boolean;
  @Column('integer', { name: 'prompt_tokens' }) promptTokens: number;
  @Column('integer', { name: 'completion_tokens' }) completionTokens: number;
  @Column('integer', { name: 'total_tokens' }) totalTokens: number;
  @Column('integer', { name: 'latency_ms' }) latencyMs: number;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
  /** The batch a batch line's usage belongs to (usage grouped by batch); absent for live requests. */
  @Column('text', { name: 'batch_id', nullable: true }) batchId?: string | null;
  /** The LoRA adapter the request addressed (usage and money per adapter, docs/adapters.md); null for the base model. */
  @Column('text', { name: 'adapter_id', nullable: true }) adapterId?: string | null;
}
