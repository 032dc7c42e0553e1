import type { DataSource, Repository } from 'typeorm';
import { ResponseRecord } from './response-record.entity';

/**
 * Whose responses a call may see: its workspace's, on the deployment it called (or, a guest's,
 * on the shared model: `shared/<model-id>`). `SHARED_SCOPE` is any of the guest's shared models
 * (`/shared/v1/responses/{id}` names none).
 */
export interface ResponseScope {
  readonly workspaceId: string;
  readonly deploymentId: string;
}

export const SHARED_SCOPE = 'shared/*';
const SHARED_PREFIX = 'shared/%';

/**
 * The responses table. Every read and delete is scoped: a response of another workspace or
 * deployment, or one past its retention, is not found (the caller answers 404 as for an id
 * that never existed, so ids cannot be probed).
 */
export class ResponseStore {
  private readonly rows: Repository<ResponseRecord>;

  constructor(private readonly dataSource: DataSource) {
    this.rows = dataSource.getRepository(ResponseRecord);
  }

  async find(scope: ResponseScope, id: string): Promise<ResponseRecord | null> {
    const [row] = await this.rows.createQueryBuilder('response')
      .where(`response.id = :id AND response.workspace_id = :workspaceId AND response.deployment_id ${deploymentTest(scope)} AND response.expires_at > clock_timestamp()`,
        { id, workspaceId: scope.workspaceId, deploymentId: deploymentValue(scope) })
      .limit(1).getMany();
    return row ?? null;
  }

  async insert(record: ResponseRecord): Promise<void> {
    await this.dataSource.query(
      `INSERT INTO responses (id, workspace_id, deployment_id, api_key_id, model, status, background, previous_response_id, settings, history, input, output,
         usage, error, incomplete_details, created_at, completed_at, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
      [record.id, record.workspaceId, record.deploymentId, record.apiKeyId, record.model, record.status, record.background, record.previousResponseId,
        json(record.settings), json(record.history), json(record.input), json(record.output), json(record.usage), json(record.error),
        json(record.incompleteDetails), record.createdAt, record.completedAt, record.expiresAt]);
  }

  /** Writes the end of a response stored when it started (background runs); false when it is gone or already ended. */
  async finish(id: string, end: Pick<ResponseRecord, 'status' | 'output' | 'usage' | 'error' | 'incompleteDetails'>): Promise<boolean> {
    const result = await this.dataSource.query(
      `UPDATE responses SET status = $2, output = $3, usage = $4, error = $5, incomplete_details = $6, completed_at = clock_timestamp()
       WHERE id = $1 AND status IN ('queued', 'in_progress')`,
      [id, end.status, json(end.output), json(end.usage), json(end.error), json(end.incompleteDetails)]);
    return Array.isArray(result) && typeof result[1] === 'number' && result[1] > 0;
  }

  async delete(scope: ResponseScope, id: string): Promise<boolean> {
    const result = await this.rows.createQueryBuilder().delete().from(ResponseRecord)
      .where(`id = :id AND workspace_id = :workspaceId AND deployment_id ${deploymentTest(scope)}`, { id, workspaceId: scope.workspaceId, deploymentId: deploymentValue(scope) })
      .execute();
    return (result.affected ?? 0) > 0;
  }

  /** Deletes up to `limit` responses past their retention; resolves with how many. */
  async deleteExpired(limit: number): Promise<number> {
    const result = await this.dataSource.query(
      'DELETE FROM responses WHERE id IN (SELECT id FROM responses WHERE expires_at < clock_timestamp() ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)', [limit]);
    return Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0;
  }
}

/** A jsonb parameter (null stays SQL NULL). */
function json(value: unknown): string | null {
  return value === null || value === undefined ? null : JSON.stringify(value);
}

function deploymentTest(scope: ResponseScope): string {
  return scope.deploymentId === SHARED_SCOPE ? 'LIKE :deploymentId' : '= :deploymentId';
}

function deploymentValue(scope: ResponseScope): string {
  return scope.deploymentId === SHARED_SCOPE ? SHARED_PREFIX : scope.deploymentId;
}
