import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import { nullableNumeric } from '../database/numeric-column';

/** The tenant: every record (keys, deployments, usage) belongs to exactly one workspace. */
@Entity('workspaces')
export class Workspace {
  @PrimaryColumn('text') id: string;
  @Column('text') name: string;
  /** Prepaid credit; null means no credit limit (postpaid). At or below 0 requests get 402. */
  @Column('numeric', { name: 'credit_balance', precision: 20, scale: 10, nullable: true, transformer: nullableNumeric })
  creditBalance: number | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
}
