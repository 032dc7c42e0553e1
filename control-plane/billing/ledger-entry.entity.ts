import { Column, Entity, PrimaryGeneratedColumn } from 'typeorm';
import type { Money } from './money';

/**
 * Every movement of money is one ledger row; `amount` is its signed effect on the workspace's
 * balance, so a prepaid workspace's `credit_balance` equals the sum of its rows at all times.
 * - `gpu_time` (−): one metered period of one replica at its offer's hourly price.
 * - `top_up` (+): credit an operator added.
 * - `guest_debit` (−) / `owner_credit` (+): one shared (guest) request, the same amount on
 *   both sides, linked by `shared_request_id`.
 * - `opening_balance` (±): makes the rows add up to the balance when a workspace becomes
 *   prepaid (the migration that introduced kinds, or a postpaid workspace's first top-up);
 *   it closes out the postpaid history before it.
 */
export const LEDGER_KINDS = ['gpu_time', 'top_up', 'guest_debit', 'owner_credit', 'opening_balance'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

@Entity('billing_ledger')
export class LedgerEntry {
  @PrimaryGeneratedColumn('identity', { type: 'bigint' }) id: string;
  @Column('text', { name: 'workspace_id' }) workspaceId: string;
  @Column('text') kind: LedgerKind;
  /** gpu_time: the replica's deployment; owner_credit: the owner's shared deployment. */
  @Column('text', { name: 'deployment_id', nullable: true }) deploymentId: string | null;
  @Column('text', { name: 'replica_id', nullable: true }) replicaId: string | null;
  @Column('timestamptz', { name: 'period_start', nullable: true }) periodStart: Date | null;
  @Column('timestamptz', { name: 'period_end', nullable: true }) periodEnd: Date | null;
  /** Read as text: node-postgres returns `numeric` as a string, and money stays one. */
  @Column('numeric', { name: 'price_per_hour', precision: 12, scale: 4, nullable: true }) pricePerHour: string | null;
  @Column('numeric', { precision: 20, scale: 10 }) amount: Money;
  @Column('text', { name: 'model_id', nullable: true }) modelId: string | null;
  @Column('integer', { name: 'prompt_tokens', nullable: true }) promptTokens: number | null;
  @Column('integer', { name: 'completion_tokens', nullable: true }) completionTokens: number | null;
  @Column('text', { name: 'shared_request_id', nullable: true }) sharedRequestId: string | null;
  @Column('timestamptz', { name: 'created_at' }) createdAt: Date;
}
