import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import { numeric } from '../database/numeric-column';


/**
 * One metered period of one replica: [periodStart, periodEnd) at the price of the offer it
 * runs on. A replica's periods tile its billable lifetime exactly, so the ledger sums to
 * lifetime × price.
 */
@Entity('billing_ledger')
export class LedgerEntry {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text', { name: 'deployment_id' }) deploymentId: string;
  @Column('text', { name: 'replica_id' }) replicaId: string;
  @Column('timestamptz', { name: 'period_start' }) periodStart: Date;
  @Column('timestamptz', { name: 'period_end' }) periodEnd: Date;
  @Column('numeric', { name: 'price_per_hour', precision: 12, scale: 4, transformer: numeric }) pricePerHour: number;
  @Column('numeric', { precision: 20, scale: 10, transformer: numeric }) amount: number;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
}
