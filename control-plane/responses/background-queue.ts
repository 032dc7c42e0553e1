import type { DataSource, EntityManager } from 'typeorm';
import type { ResponseStatus } from './response-items';
import { ResponseRecord } from './response-record.entity';
import { deploymentCondition, type ResponseScope } from './response-scope';

/** Runs inside the transaction that ended a background response (the webhook outbox writes its event here). */
export type ResponseTerminalHook = (manager: EntityManager, record: ResponseRecord) => Promise<void>;

export type BackgroundEnd = Pick<ResponseRecord, 'output' | 'usage' | 'error' | 'incompleteDetails'> & { status: Exclude<ResponseStatus, 'queued' | 'in_progress'> };

/**
 * The background responses' queue: rows of the responses table with `background` true, moved
 * queued → in_progress → completed | incomplete | failed | cancelled by conditional UPDATEs (a
 * cancel racing a completion, or two servers racing for a row whose server died, never both
 * win), as request-records.ts does for media jobs. A row is owned by the server whose lease it
 * carries; one whose lease lapsed is any server's to take (SKIP LOCKED). Terminal changes run
 * the terminal hooks in their transaction (the webhook outbox).
 */
export class BackgroundQueue {
  private readonly hooks: ResponseTerminalHook[] = [];

  constructor(private readonly dataSource: DataSource) {}

  onTerminal(hook: ResponseTerminalHook): void {
    this.hooks.push(hook);
  }

  /** Stores a new background response `queued`, leased to `owner` (the server that starts it at once). */
  async insert(record: ResponseRecord): Promise<void> {
    await this.dataSource.getRepository(ResponseRecord).save(record);
  }

  /**
   * Moves a row this server may run to `in_progress` and counts the attempt: its own fresh row
   * (`own`), or one nobody holds (its lease lapsed: the server died, or it was put back).
   */
  async claim(id: string, owner: string, leaseMs: number, own: boolean): Promise<ResponseRecord | null> {
    const rows = await this.dataSource.query(`
      UPDATE responses SET status = 'in_progress', attempts = attempts + 1, lease_owner = $2,
        lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
      WHERE id = $1 AND background AND status IN ('queued', 'in_progress')
        AND (($4 AND lease_owner = $2 AND status = 'queued') OR lease_expires_at IS NULL OR lease_expires_at < clock_timestamp())
      RETURNING id`, [id, owner, leaseMs, own]) as unknown[];
    const [row] = (Array.isArray(rows[0]) ? rows[0] : rows) as Array<{ id: string }>;
    return row ? await this.dataSource.getRepository(ResponseRecord).findOneBy({ id }) : null;
  }

  /** Background rows nobody holds (lease lapsed or cleared), oldest first: the sweep claims them. */
  async unheld(limit: number): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.dataSource.query(`
      SELECT id FROM responses WHERE background AND status IN ('queued', 'in_progress')
        AND (lease_expires_at IS NULL OR lease_expires_at < clock_timestamp())
      ORDER BY created_at LIMIT $1`, [limit]);
    return rows.map((row) => row.id);
  }

  async renewLeases(owner: string, ids: string[], leaseMs: number): Promise<void> {
    if (ids.length === 0) return;
    await this.dataSource.query(`
      UPDATE responses SET lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
      WHERE id = ANY($2) AND status = 'in_progress' AND lease_owner = $1`, [owner, ids, leaseMs]);
  }

  /**
   * Puts an in-progress row back in the queue, due after `delayMs` (no replica free now, or this
   * server is stopping): any server, this one included, takes it then. `uncount`: nothing ran
   * (admission or placement refused it), so the attempt does not count.
   */
  async requeue(id: string, owner: string, delayMs: number, uncount: boolean): Promise<boolean> {
    const result = await this.dataSource.query(`
      UPDATE responses SET status = 'queued', lease_owner = NULL, lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond',
        attempts = CASE WHEN $4 THEN attempts - 1 ELSE attempts END
      WHERE id = $1 AND status = 'in_progress' AND lease_owner = $2`, [id, owner, delayMs, uncount]);
    return affected(result) > 0;
  }

  /** Ends a row that is still queued or in progress; null when it had already ended (a cancel won, say). */
  async finish(id: string, end: BackgroundEnd, from: Array<'queued' | 'in_progress'> = ['queued', 'in_progress']): Promise<ResponseRecord | null> {
    return await this.dataSource.transaction(async (manager) => {
      const result = await manager.query(`
        UPDATE responses SET status = $2, output = $3, usage = $4, error = $5, incomplete_details = $6, completed_at = clock_timestamp(),
          lease_owner = NULL, lease_expires_at = NULL
        WHERE id = $1 AND background AND status = ANY($7)`,
      [id, end.status, json(end.output), json(end.usage), json(end.error), json(end.incompleteDetails), from]);
      if (affected(result) === 0) return null;
      const record = (await manager.findOneBy(ResponseRecord, { id }))!;
      for (const hook of this.hooks) await hook(manager, record);
      return record;
    });
  }

  /**
   * A cancelled turn's engine job ended: what it made and used goes on the row the cancel already
   * ended (the cancel answers at once; the engine's count comes after).
   */
  async recordCancelled(id: string, end: Pick<ResponseRecord, 'output' | 'usage'>): Promise<void> {
    await this.dataSource.query(`UPDATE responses SET output = $2, usage = $3 WHERE id = $1 AND status = 'cancelled' AND usage IS NULL`,
      [id, json(end.output), json(end.usage)]);
  }

  /** The row as its owner sees it (scoped like every read of the Responses API), or null. */
  async find(scope: ResponseScope, id: string): Promise<ResponseRecord | null> {
    const deployment = deploymentCondition(scope, 'response.deployment_id', ':deploymentId');
    return await this.dataSource.getRepository(ResponseRecord).createQueryBuilder('response')
      .where(`response.id = :id AND response.workspace_id = :workspaceId AND ${deployment.sql} AND response.expires_at > clock_timestamp()`,
        { id, workspaceId: scope.workspaceId, deploymentId: deployment.value })
      .getOne();
  }
}

function affected(result: unknown): number {
  return Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0;
}

/** A jsonb parameter (null stays SQL NULL). */
function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}
