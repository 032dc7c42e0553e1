import type { DataSource, EntityManager } from 'typeorm';
import type { Logger } from 'pino';

export interface MeteringOptions {
  /** How often running replicas are billed up to now. @default 60000 */
  intervalMs: number;
}

/**
 * What a metering pass or a stopped meter charged, per deployment, as a positive number: for
 * the spend metric only (Prometheus counters are doubles); the ledger keeps the exact amounts.
 */
export type Charges = Array<{ deploymentId: string; amount: number }>;

/**
 * Bills replicas by the second while they run: GPU-hours × the hourly price of the offer each
 * replica runs on. A Running replica carries `metered_until`, the instant it is billed up to;
 * a pass bills [metered_until, now) for every one of them and moves the mark, and leaving
 * Running (lost, released, paused, deleted) bills the last stretch and clears it — in the same
 * statement as the status change, so periods tile each replica's running time exactly, with
 * one clock (PostgreSQL's). Each period is a `gpu_time` ledger row holding minus its charge; a
 * workspace with prepaid credit is debited in the same statement.
 */
export class Metering {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | null = null;
  private readonly listeners: Array<(charges: Charges) => void> = [];

  constructor(private readonly dataSource: DataSource, private readonly options: MeteringOptions, private readonly logger: Logger) {}

  start(): void {
    this.timer = setInterval(() => void this.meterRunning(), this.options.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  onCharges(listener: (charges: Charges) => void): void {
    this.listeners.push(listener);
  }

  /** Bills every running replica up to now. SKIP LOCKED: servers metering at once never bill a period twice. */
  meterRunning(): Promise<Charges> {
    const pass = this.dataSource.query(`
      WITH clock AS (SELECT statement_timestamp() AS at),
      due AS (
        SELECT r.id, r.deployment_id, d.workspace_id, r.metered_until AS period_start, r.price_per_hour
        FROM replicas r JOIN deployments d ON d.id = r.deployment_id
        WHERE r.status = 'Running' AND r.metered_until IS NOT NULL
        FOR UPDATE OF r SKIP LOCKED
      ),
      -- Never back: a row another pass moved past this statement's clock (locked after that pass
      -- committed, so read in its newer version) keeps its later end, or the next pass would bill
      -- the stretch between the two clocks again.
      moved AS (UPDATE replicas r SET metered_until = GREATEST(due.period_start, (SELECT at FROM clock)) FROM due WHERE r.id = due.id RETURNING r.id),
      ${BILL_AND_DEBIT('due')}
      SELECT deployment_id, (-sum(amount))::float8 AS amount FROM billed GROUP BY deployment_id`)
      .then((rows: Array<{ deployment_id: string; amount: number }>) => this.charged(rows))
      .catch((error) => {
        this.logger.error({ err: error }, 'metering pass failed; the next pass bills the same periods');
        return [] as Charges;
      });
    this.running = pass;
    return pass;
  }

  /**
   * Moves replicas out of Running to `status` (Unhealthy or Terminated) and bills their last
   * stretch, in one statement. Replicas not Running change status without a charge.
   */
  async leaveRunning(replicaIds: string[], status: 'Unhealthy' | 'Terminated', reason: string, manager: EntityManager | DataSource = this.dataSource): Promise<Charges> {
    if (replicaIds.length === 0) return [];
    const rows: Array<{ deployment_id: string; amount: number }> = await manager.query(`
      WITH clock AS (SELECT statement_timestamp() AS at),
      due AS (
        SELECT r.id, r.deployment_id, d.workspace_id, r.metered_until AS period_start, r.price_per_hour
        FROM replicas r JOIN deployments d ON d.id = r.deployment_id
        WHERE r.id = ANY($1) AND r.status <> 'Terminated'
        FOR UPDATE OF r
      ),
      moved AS (
        UPDATE replicas r SET status = $2, status_reason = $3, metered_until = NULL, load_percent = NULL,
          last_seen_at = (SELECT at FROM clock),
          -- Not before what a pass with a later clock already billed (see meterRunning): the
          -- replica's lifetime is then exactly the sum of its billed periods.
          terminated_at = CASE WHEN $2 = 'Terminated' THEN GREATEST(due.period_start, (SELECT at FROM clock)) ELSE r.terminated_at END
        FROM due WHERE r.id = due.id RETURNING r.id
      ),
      ${BILL_AND_DEBIT('due')}
      SELECT deployment_id, (-sum(amount))::float8 AS amount FROM billed GROUP BY deployment_id`, [replicaIds, status, reason]);
    return this.charged(rows);
  }

  private charged(rows: Array<{ deployment_id: string; amount: number }>): Charges {
    const charges = rows.map((row) => ({ deploymentId: row.deployment_id, amount: Number(row.amount) }));
    if (charges.length > 0) for (const listener of this.listeners) listener(charges);
    return charges;
  }
}

/**
 * The `gpu_time` ledger rows for `source` (rows with a period_start) up to the statement's
 * clock, each the negative of its charge, and their effect on prepaid balances. Shared by the
 * pass and by leaving Running, so both bill alike.
 *
 * `payers` locks the workspaces billed, in id order and before any row is written (an
 * InitPlan), as settlement and top-ups do: the locks are never taken in opposite orders, and a
 * first top-up (which turns a postpaid workspace prepaid) sees these rows or waits for them.
 * The UPDATE has no `credit_balance IS NOT NULL` filter on purpose: it would be judged on the
 * statement's snapshot, before a concurrent first top-up; `NULL + x` keeps a postpaid
 * workspace postpaid, and a row that became prepaid meanwhile is re-read and debited.
 */
function BILL_AND_DEBIT(source: string): string {
  return `
      payers AS (
        SELECT w.id FROM workspaces w WHERE w.id IN (SELECT workspace_id FROM ${source} WHERE period_start IS NOT NULL)
        ORDER BY w.id FOR NO KEY UPDATE
      ),
      billed AS (
        INSERT INTO billing_ledger (workspace_id, kind, deployment_id, replica_id, period_start, period_end, price_per_hour, amount)
        SELECT workspace_id, 'gpu_time', deployment_id, id, period_start, (SELECT at FROM clock), price_per_hour,
          -(price_per_hour * extract(epoch FROM (SELECT at FROM clock) - period_start) / 3600)
        -- A row locked after another pass moved its period past this statement's clock (it waited
        -- on the lock, then read the newer row) has nothing left to bill: that pass billed it.
        FROM ${source} WHERE period_start IS NOT NULL AND period_start < (SELECT at FROM clock) AND (SELECT count(*) FROM payers) >= 0
        RETURNING workspace_id, deployment_id, amount
      ),
      debited AS (
        UPDATE workspaces w SET credit_balance = w.credit_balance + spent.total
        FROM (SELECT workspace_id, sum(amount) AS total FROM billed GROUP BY workspace_id) spent
        WHERE w.id = spent.workspace_id RETURNING w.id
      )`;
}
