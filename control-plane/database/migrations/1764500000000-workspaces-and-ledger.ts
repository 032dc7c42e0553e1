import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * One ledger for every movement of money: `billing_ledger` rows get a kind and a signed
 * amount (their effect on the balance), so a prepaid workspace's balance equals the sum of its
 * rows; guest (shared) requests get their debit and credit rows; credit holds of guest
 * requests in flight; soft-deleted workspaces.
 *
 * Existing rows were all GPU time, stored as positive charges: they become `gpu_time` and
 * negative. A prepaid workspace also gets an `opening_balance` row of its balance minus its
 * (now signed) rows, since its balance came from credit that no row recorded and its rows
 * include periods billed while it was still postpaid.
 */
export class WorkspacesAndLedger1764500000000 implements MigrationInterface {
  name = 'WorkspacesAndLedger1764500000000';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE workspaces ADD COLUMN deleted_at timestamptz;

      ALTER TABLE billing_ledger DROP CONSTRAINT billing_ledger_amount_check;
      ALTER TABLE billing_ledger ADD COLUMN kind text;
      UPDATE billing_ledger SET kind = 'gpu_time', amount = -amount;
      ALTER TABLE billing_ledger ALTER COLUMN kind SET NOT NULL;
      ALTER TABLE billing_ledger
        ALTER COLUMN deployment_id DROP NOT NULL,
        ALTER COLUMN replica_id DROP NOT NULL,
        ALTER COLUMN period_start DROP NOT NULL,
        ALTER COLUMN period_end DROP NOT NULL,
        ALTER COLUMN price_per_hour DROP NOT NULL,
        ADD COLUMN model_id text,
        ADD COLUMN prompt_tokens integer CHECK (prompt_tokens >= 0),
        ADD COLUMN completion_tokens integer CHECK (completion_tokens >= 0),
        ADD COLUMN shared_request_id text;
      -- What each kind must carry, and the sign of its effect on the balance.
      ALTER TABLE billing_ledger ADD CONSTRAINT billing_ledger_kind_check CHECK (CASE kind
        WHEN 'gpu_time' THEN amount <= 0 AND deployment_id IS NOT NULL AND replica_id IS NOT NULL
          AND period_start IS NOT NULL AND period_end IS NOT NULL AND price_per_hour IS NOT NULL
        WHEN 'top_up' THEN amount > 0
        WHEN 'guest_debit' THEN amount <= 0 AND shared_request_id IS NOT NULL AND model_id IS NOT NULL
          AND prompt_tokens IS NOT NULL AND completion_tokens IS NOT NULL
        WHEN 'owner_credit' THEN amount >= 0 AND shared_request_id IS NOT NULL AND model_id IS NOT NULL
          AND deployment_id IS NOT NULL AND prompt_tokens IS NOT NULL AND completion_tokens IS NOT NULL
        WHEN 'opening_balance' THEN true
        ELSE false END);
      -- One debit and one credit per guest request: settling it again finds them and changes nothing.
      CREATE UNIQUE INDEX billing_ledger_shared_request ON billing_ledger (kind, shared_request_id);
      CREATE INDEX billing_ledger_workspace_created ON billing_ledger (workspace_id, created_at);

      INSERT INTO billing_ledger (workspace_id, kind, amount)
      SELECT w.id, 'opening_balance', w.credit_balance - coalesce(rows.total, 0)
      FROM workspaces w LEFT JOIN (SELECT workspace_id, sum(amount) AS total FROM billing_ledger GROUP BY workspace_id) rows ON rows.workspace_id = w.id
      WHERE w.credit_balance IS NOT NULL AND w.credit_balance <> coalesce(rows.total, 0);

      -- Credit held for guest requests in flight; a hold past expires_at no longer counts.
      CREATE TABLE credit_reservations (
        id text PRIMARY KEY,
        workspace_id text NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
        amount numeric(20,10) NOT NULL CHECK (amount >= 0),
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX credit_reservations_workspace ON credit_reservations (workspace_id, expires_at);
    `);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      DROP TABLE credit_reservations;
      DROP INDEX billing_ledger_workspace_created;
      DROP INDEX billing_ledger_shared_request;
      ALTER TABLE billing_ledger DROP CONSTRAINT billing_ledger_kind_check;
      DELETE FROM billing_ledger WHERE kind <> 'gpu_time';
      UPDATE billing_ledger SET amount = -amount;
      ALTER TABLE billing_ledger
        DROP COLUMN kind, DROP COLUMN model_id, DROP COLUMN prompt_tokens, DROP COLUMN completion_tokens, DROP COLUMN shared_request_id,
        ALTER COLUMN deployment_id SET NOT NULL,
        ALTER COLUMN replica_id SET NOT NULL,
        ALTER COLUMN period_start SET NOT NULL,
        ALTER COLUMN period_end SET NOT NULL,
        ALTER COLUMN price_per_hour SET NOT NULL,
        ADD CONSTRAINT billing_ledger_amount_check CHECK (amount >= 0);
      ALTER TABLE workspaces DROP COLUMN deleted_at;
    `);
  }
}
