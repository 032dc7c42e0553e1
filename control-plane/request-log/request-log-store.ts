import type { DataSource } from 'typeorm';
import { AppError } from '../errors/app-error';
import type { RequestPhases } from '../pipeline/finished-request';

export const REQUEST_LOG_OUTCOMES = ['succeeded', 'failed', 'canceled'] as const;
/** Entries per page: 1 to this many. */
export const MAX_REQUEST_LOG_PAGE = 200;

/** One request as the log shows it (bodies are read apart: `body`). */
export interface RequestLogEntry {
  /** The request id (`x-request-id`), or `log_<n>` for work no HTTP request carried (a batch line). */
  readonly id: string;
  readonly requestId: string | null;
  readonly startedAt: Date;
  readonly apiKeyId: string;
  readonly apiKeyName: string | null;
  /** Null on a guest's entry: it names its shared model instead. */
  readonly deploymentId: string | null;
  readonly deploymentSlug: string | null;
  readonly sharedModel: string | null;
  readonly replicaId: string | null;
  readonly batchId: string | null;
  /** The LoRA adapter the request addressed (its id and the name it was called by); null for the base model. */
  readonly adapterId: string | null;
  readonly adapterName: string | null;
  readonly model: string;
  readonly endpoint: string;
  readonly stream: boolean;
  readonly status: string;
  readonly errorCode: string | null;
  readonly finishReason: string | null;
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens: number;
  readonly latencyMs: number;
  readonly ttftMs: number | null;
  readonly traceId: string | null;
  readonly phases: RequestPhases | null;
  /** Whether the entry has stored bodies. */
  readonly hasBody: boolean;
}

export interface RequestLogBody {
  readonly request: string;
  readonly requestTruncated: boolean;
  /** Null where answers are not stored (embeddings). */
  readonly response: string | null;
  readonly responseTruncated: boolean;
}

export interface RequestLogFilter {
  readonly deploymentId?: string | null;
  readonly apiKeyId?: string | null;
  /** The catalog model id, or a guest's `shared/<model-id>`. */
  readonly model?: string | null;
  readonly status?: string | null;
  readonly finishReason?: string | null;
  readonly from?: Date | null;
  readonly to?: Date | null;
  /** A request id (or `log_<n>` id) or a trace id, exactly. */
  readonly search?: string | null;
}

export interface RequestLogPage {
  readonly entries: RequestLogEntry[];
  /** Pass as `after` for the next (older) page; null on the last. */
  readonly nextCursor: string | null;
}

/**
 * An entry's phases in ms, from `phase_us` (µs, written since migration 1765840000000) or from
 * the jsonb of entries written before it; made only for the entries a page shows.
 */
const PHASES = `COALESCE(CASE WHEN l.phase_us IS NOT NULL THEN jsonb_strip_nulls(jsonb_build_object('admittedMs', l.phase_us[1]::float8 / 1000,
  'dispatchedMs', l.phase_us[2]::float8 / 1000, 'startedMs', l.phase_us[3]::float8 / 1000, 'firstTokenMs', l.phase_us[4]::float8 / 1000,
  'endedMs', l.phase_us[5]::float8 / 1000)) END, l.phases)`;
const COLUMNS = `l.seq, l.request_id, l.started_at, l.api_key_id, k.name AS api_key_name, l.deployment_id, d.slug AS deployment_slug, l.shared_model,
  l.replica_id, l.batch_id, l.adapter_id, l.adapter_name, l.model, l.endpoint, l.stream, l.outcome, l.error_code, l.finish_reason, l.prompt_tokens, l.completion_tokens,
  l.cached_tokens, l.latency_ms, l.ttft_ms, l.trace_id, ${PHASES} AS phases, (l.request_body IS NOT NULL) AS has_body`;
const FROM = `FROM request_log l LEFT JOIN api_keys k ON k.id = l.api_key_id LEFT JOIN deployments d ON d.id = l.deployment_id`;
const LOG_ID = /^log_(\d{1,18})$/;

/**
 * Reads a workspace's request log: filtered, newest first, a page at a time by cursor (the
 * last entry's time and sequence, so entries written meanwhile never shift a page). Every
 * query is scoped to the workspace: another workspace's entry is not found like a missing one.
 */
export class RequestLogStore {
  constructor(private readonly dataSource: DataSource) {}

  async page(workspaceId: string, filter: RequestLogFilter, first: number, after: string | null): Promise<RequestLogPage> {
    if (!Number.isInteger(first) || first < 1 || first > MAX_REQUEST_LOG_PAGE) {
      throw new AppError('invalid_request', `first must be an integer from 1 to ${MAX_REQUEST_LOG_PAGE}, got ${first}`, { param: 'first' });
    }
    const where = ['l.workspace_id = $1'];
    const args: unknown[] = [workspaceId];
    const add = (condition: (placeholder: string) => string, value: unknown) => {
      args.push(value);
      where.push(condition(`$${args.length}`));
    };
    if (filter.deploymentId) add((p) => `l.deployment_id = ${p}`, filter.deploymentId);
    if (filter.apiKeyId) add((p) => `l.api_key_id = ${p}`, filter.apiKeyId);
    if (filter.model) add((p) => `(l.model = ${p} OR l.shared_model = ${p})`, filter.model);
    if (filter.status) {
      if (!(REQUEST_LOG_OUTCOMES as readonly string[]).includes(filter.status)) {
        throw new AppError('invalid_request', `status must be one of ${REQUEST_LOG_OUTCOMES.join(', ')}`, { param: 'status' });
      }
      add((p) => `l.outcome = ${p}`, filter.status);
    }
    if (filter.finishReason) add((p) => `l.finish_reason = ${p}`, filter.finishReason);
    checkDate(filter.from, 'from');
    checkDate(filter.to, 'to');
    if (filter.from && filter.to && filter.to <= filter.from) throw new AppError('invalid_request', 'to must be after from', { param: 'to' });
    if (filter.from) add((p) => `l.started_at >= ${p}`, filter.from);
    if (filter.to) add((p) => `l.started_at < ${p}`, filter.to);
    const search = filter.search?.trim();
    if (search) {
      const logId = LOG_ID.exec(search);
      if (logId) add((p) => `l.seq = ${p}`, logId[1]);
      else add((p) => `(l.request_id = ${p} OR l.trace_id = lower(${p}))`, search);
    }
    if (after) {
      const cursor = parseCursor(after);
      args.push(new Date(cursor.at), cursor.seq);
      where.push(`(l.started_at, l.seq) < ($${args.length - 1}, $${args.length})`);
    }
    args.push(first + 1);
    const rows: EntryRow[] = await this.dataSource.query(
      `SELECT ${COLUMNS} ${FROM} WHERE ${where.join(' AND ')} ORDER BY l.started_at DESC, l.seq DESC LIMIT $${args.length}`, args);
    const more = rows.length > first;
    const entries = rows.slice(0, first);
    const last = entries[entries.length - 1];
    return { entries: entries.map(entryOf), nextCursor: more && last ? cursorOf(last) : null };
  }

  /** One entry by its id (request id or `log_<n>`), or null when the workspace has none. */
  async entry(workspaceId: string, id: string): Promise<RequestLogEntry | null> {
    const logId = LOG_ID.exec(id);
    const rows: EntryRow[] = await this.dataSource.query(
      `SELECT ${COLUMNS} ${FROM} WHERE l.workspace_id = $1 AND ${logId ? 'l.seq = $2' : 'l.request_id = $2'} ORDER BY l.seq DESC LIMIT 1`,
      [workspaceId, logId ? logId[1] : id]);
    return rows[0] ? entryOf(rows[0]) : null;
  }

  /** An entry's stored bodies, or null when it has none (storing was off, or not the workspace's entry). */
  async body(workspaceId: string, id: string): Promise<RequestLogBody | null> {
    const logId = LOG_ID.exec(id);
    const rows: Array<{ request_body: string | null; request_body_truncated: boolean; response_body: string | null; response_body_truncated: boolean }> = await this.dataSource.query(
      `SELECT request_body, request_body_truncated, response_body, response_body_truncated FROM request_log l
       WHERE l.workspace_id = $1 AND ${logId ? 'l.seq = $2' : 'l.request_id = $2'} ORDER BY l.seq DESC LIMIT 1`,
      [workspaceId, logId ? logId[1] : id]);
    const row = rows[0];
    if (!row || row.request_body === null) return null;
    return { request: row.request_body, requestTruncated: row.request_body_truncated, response: row.response_body, responseTruncated: row.response_body_truncated };
  }

  /** Deletes entries (and their bodies) that started before `before`, up to `limit`. */
  async deleteBefore(before: Date, limit: number): Promise<number> {
    const result = await this.dataSource.query(
      'DELETE FROM request_log WHERE seq IN (SELECT seq FROM request_log WHERE started_at < $1 ORDER BY started_at LIMIT $2 FOR UPDATE SKIP LOCKED)', [before, limit]);
    return Array.isArray(result) && typeof result[1] === 'number' ? result[1] : 0;
  }
}

interface EntryRow {
  seq: string;
  request_id: string | null;
  started_at: Date;
  api_key_id: string;
  api_key_name: string | null;
  deployment_id: string | null;
  deployment_slug: string | null;
  shared_model: string | null;
  replica_id: string | null;
  batch_id: string | null;
  adapter_id: string | null;
  adapter_name: string | null;
  model: string;
  endpoint: string;
  stream: boolean;
  outcome: string;
  error_code: string | null;
  finish_reason: string | null;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  latency_ms: number;
  ttft_ms: number | null;
  trace_id: string | null;
  phases: RequestPhases | null;
  has_body: boolean;
}

function entryOf(row: EntryRow): RequestLogEntry {
  return {
    id: row.request_id ?? `log_${row.seq}`, requestId: row.request_id, startedAt: row.started_at, apiKeyId: row.api_key_id, apiKeyName: row.api_key_name,
    deploymentId: row.deployment_id, deploymentSlug: row.deployment_slug, sharedModel: row.shared_model, replicaId: row.replica_id, batchId: row.batch_id,
    adapterId: row.adapter_id, adapterName: row.adapter_name,
    model: row.model, endpoint: row.endpoint, stream: row.stream, status: row.outcome, errorCode: row.error_code, finishReason: row.finish_reason,
    promptTokens: row.prompt_tokens, completionTokens: row.completion_tokens, cachedTokens: row.cached_tokens, latencyMs: row.latency_ms,
    ttftMs: row.ttft_ms, traceId: row.trace_id, phases: row.phases, hasBody: row.has_body,
  };
}

function cursorOf(row: EntryRow): string {
  return Buffer.from(`${row.started_at.toISOString()}|${row.seq}`).toString('base64url');
}

function parseCursor(cursor: string): { at: number; seq: string } {
  const [at, seq] = Buffer.from(cursor, 'base64url').toString('utf8').split('|');
  const time = Date.parse(at ?? '');
  if (Number.isNaN(time) || !/^\d{1,18}$/.test(seq ?? '')) throw new AppError('invalid_request', 'after is not a cursor this log gave', { param: 'after' });
  return { at: time, seq };
}

function checkDate(value: Date | null | undefined, field: string): void {
  if (value !== null && value !== undefined && (!(value instanceof Date) || Number.isNaN(value.getTime()))) {
    throw new AppError('invalid_request', `${field} must be a date`, { param: field });
  }
}
