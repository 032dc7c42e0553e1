import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import { numeric } from '../database/numeric-column';


/**
 * A machine an operator registered for the `static` provider: its agent joins with the host
 * token and becomes whichever replica placement assigned to the host.
 */
@Entity('gpu_hosts')
export class GpuHost {
  @PrimaryColumn('text') id: string;
  @Column('text') name: string;
  @Column('text', { name: 'gpu_name' }) gpuName: string;
  @Column('numeric', { name: 'gpu_memory_gb', precision: 8, scale: 2, transformer: numeric }) gpuMemoryGb: number;
  @Column('text') region: string;
  @Column('numeric', { name: 'price_per_hour', precision: 12, scale: 4, transformer: numeric }) pricePerHour: number;
  @Column('text', { name: 'host_token_hash' }) hostTokenHash: string;
  /** The replica placed on the host; null while the host is free. */
  @Column('text', { name: 'replica_id', nullable: true }) replicaId: string | null;
  @Column('timestamptz', { name: 'removed_at', nullable: true }) removedAt: Date | null;
  /** Models the host's weights cache holds, as its agent's last Hello said: placement prefers such a host for them. */
  @Column('jsonb', { name: 'cached_models', default: () => "'[]'" }) cachedModels: string[];
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
