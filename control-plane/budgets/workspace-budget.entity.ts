import { Column, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';

/**
 * An operator's limit for one workspace, replacing a budget's default in one scope (per key or
 * per workspace); absent rows leave the defaults (budget-kinds.ts, their environment variables).
 */
@Entity('workspace_budgets')
export class WorkspaceBudget {
  @PrimaryColumn('text', { name: 'workspace_id' }) workspaceId: string;
  @PrimaryColumn('text') budget: string;
  @PrimaryColumn('text') scope: string;
  /** bigint: byte budgets pass 2^31. */
  @Column('bigint', { name: 'limit_value', transformer: { to: (value: number) => value, from: (value: string) => Number(value) } }) limit: number;
  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' }) updatedAt: Date;
}
