import type { DataSource } from 'typeorm';
import { ResponseRecord } from './response-record.entity';
import { deploymentCondition, type ResponseScope } from './response-scope';

/** Columns of one inserted row, and rows per statement (well under PostgreSQL's 65,535 parameters). */
const COLUMNS = 18;
const MAX_ROWS_PER_INSERT = 500;

/**
 * The responses table. Every read and delete is scoped: a response of another workspace or
 * deployment, or one past its retention, is not found (the caller answers 404 as for an id
 * that never existed, so ids cannot be probed).
 */
export class ResponseStore {
  private readonly waiting: { record: ResponseRecord; resolve: () => void; reject: (error: unknown) => void }[] = [];
  private flushing = false;

  constructor(private readonly dataSource: DataSource) {}

  /** One query by primary key; the row is mapped here, without TypeORM's entity hydration (the lookup is on every chained turn). */
  async find(scope: ResponseScope, id: string): Promise<ResponseRecord | null> {
    const deployment = deploymentCondition(scope, 'deployment_id', '$3');
    const rows = await this.dataSource.query(
      `SELECT id, workspace_id, deployment_id, api_key_id, model, status, background, previous_response_id, settings, history, input, output, usage, error,
         incomplete_details, created_at, completed_at, expires_at
       FROM responses WHERE id = $1 AND workspace_id = $2 AND ${deployment.sql} AND expires_at > clock_timestamp()`,
      [id, scope.workspaceId, deployment.value]) as Record<string, unknown>[];
    return rows.length === 0 ? null : recordOf(rows[0]);
  }

  /**
   * Stores a response; resolves once it is committed (a chain may continue from it at once, on
   * any server). Inserts that arrive while one is in flight go together in the next statement
   * (group commit): at 8 concurrent turns a statement apiece cost a round trip, its syscalls and
   * a commit each (bench/results/2026-11-29-responses.md).
   */
  insert(record: ResponseRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ record, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_ROWS_PER_INSERT);
      try {
        await this.insertRows(batch.map((entry) => entry.record));
        for (const entry of batch) entry.resolve();
      } catch (error) {
        for (const entry of batch) entry.reject(error);
      }
    }
    this.flushing = false;
  }

  private async insertRows(records: ResponseRecord[]): Promise<void> {
    const values: unknown[] = [];
    const rows: string[] = [];
    for (const record of records) {
      const at = values.length;
      rows.push(`(${Array.from({ length: COLUMNS }, (_, index) => `$${at + index + 1}`).join(', ')})`);
      values.push(record.id, record.workspaceId, record.deploymentId, record.apiKeyId, record.model, record.status, record.background, record.previousResponseId,
        json(record.settings), json(record.history), json(record.input), json(record.output), json(record.usage), json(record.error),
        json(record.incompleteDetails), record.createdAt, record.completedAt, record.expiresAt);
    }
    await this.dataSource.query(
      `INSERT INTO responses (id, workspace_id, deployment_id, api_key_id, model, status, background, previous_response_id, settings, history, input, output,
         usage, error, incomplete_details, created_at, completed_at, expires_at) VALUES ${rows.join(', ')}`, values);
  }

  async delete(scope: ResponseScope, id: string): Promise<boolean> {
    const deployment = deploymentCondition(scope, 'deployment_id', '$3');
    const result = await this.dataSource.query(`DELETE FROM responses WHERE id = $1 AND workspace_id = $2 AND ${deployment.sql}`, [id, scope.workspaceId, deployment.value]);
    return affected(result) > 0;
  }

  /** Deletes up to `limit` responses past their retention; resolves with how many. */
  async deleteExpired(limit: number): Promise<number> {
    const result = await this.dataSource.query(
      'DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires_at < clock_timestamp() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)', [limit]);
    return affected(result);
  }
}

function affected(result: unknown): number {
  return Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0;
}

/** A jsonb parameter (null stays SQL NULL). */
function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}

function recordOf(row: Record<string, unknown>): ResponseRecord {
  const record = new ResponseRecord();
  Object.assign(record, {
    id: row.id, workspaceId: row.workspace_id, deploymentId: row.deployment_id, apiKeyId: row.api_key_id, model: row.model, status: row.status,
    background: row.background, previousResponseId: row.previous_response_id, settings: row.settings, history: row.history, input: row.input,
    output: row.output, usage: row.usage, error: row.error, incompleteDetails: row.incomplete_details, createdAt: row.created_at,
    completedAt: row.completed_at, expiresAt: row.expires_at,
  });
  return record;
}

