import { Column, CreateDateColumn, Entity, PrimaryColumn } from 'typeorm';
import type { Money } from '../billing/money';

/** The tenant: every record (keys, deployments, usage) belongs to exactly one workspace. */
@Entity('workspaces')
export class Workspace {
  @PrimaryColumn('text') id: string;
  @Column('text') name: string;
  /**
   * Prepaid credit as exact decimal text (node-postgres returns `numeric` as a string); null
   * means no credit limit (postpaid). At or below 0 requests get 402. Changed only together
   * with a ledger row (billing/), so it always equals the sum of the workspace's ledger rows.
   */
  @Column({ type: 'numeric', name: 'credit_balance', precision: 20, scale: 10, nullable: true, update: false, insert: false })
  creditBalance: Money | null;
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' }) createdAt: Date;
  /**
   * Whether the request log keeps this workspace's request and answer bodies. Off by default:
   * prompts hold the users' data, so keeping them is the workspace's choice (docs/observability-history.md).
   */
  @Column('boolean', { name: 'store_request_bodies', default: false }) storeRequestBodies: boolean;
  /** Soft delete: keys revoked, deployments deleted; the row and its ledger stay for audit. */
  @Column('timestamptz', { name: 'deleted_at', nullable: true }) deletedAt: Date | null;
}
