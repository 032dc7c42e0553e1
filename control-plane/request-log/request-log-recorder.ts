import type { DataSource } from 'typeorm';
import type { Logger } from 'pino';
import type { FinishedRequest, RequestObserver } from '../pipeline/finished-request';

/** Entries held while the database does not answer; past this the newest are dropped (and counted in the log). */
const MAX_PENDING = 50_000;

/**
 * Writes the request log: one entry per settled text request (chat, completions, responses,
 * embeddings, batch lines), in the workspace of the key that made it, in batches (one INSERT
 * per `flushIntervalMs`, the rows as one JSON parameter, as the usage recorder does).
 *
 * On the request path it pushes the FinishedRequest (already built for every observer) onto
 * an array: no object of its own, no string. The row, and a stored body's
 * text, are made at flush. A guest's entry names its shared model and never the owner's
 * deployment or replica.
 */
export class RequestLogRecorder implements RequestObserver {
  private pending: FinishedRequest[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();
  private dropped = 0;
  private stopped = false;

  constructor(private readonly dataSource: DataSource, private readonly flushIntervalMs: number, private readonly logger: Logger) {}

  requestFinished(request: FinishedRequest): void {
    if (this.stopped) return this.writeLate(request);
    if (this.pending.length >= MAX_PENDING) {
      this.dropped++;
      return;
    }
    this.pending.push(request);
    if (!this.timer) this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs);
  }

  /** Writes what is pending; a failed write keeps it for the next flush. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.pending.length === 0) return this.writing;
    const batch = this.pending;
    this.pending = [];
    this.writing = this.writing.then(async () => {
      try {
        await this.insert(batch);
      } catch (error) {
        this.logger.error({ err: error, entries: batch.length }, 'request log write failed; will retry');
        this.pending = batch.concat(this.pending).slice(0, MAX_PENDING);
        if (!this.timer && !this.stopped) this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs * 4);
      }
      if (this.dropped > 0) {
        this.logger.warn({ dropped: this.dropped }, 'request log entries dropped while the database did not answer');
        this.dropped = 0;
      }
    });
    return this.writing;
  }

  /**
   * A request settled after shutdown began (a job the engine ended late): written at once while
   * the database is open, as the usage recorder does; never a timer that would keep the process alive.
   */
  private writeLate(request: FinishedRequest): void {
    if (!this.dataSource.isInitialized) return;
    this.insert([request]).catch((error) => this.logger.warn({ err: error, requestId: request.requestId }, 'a request log entry arrived after shutdown and was not written'));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.dataSource.isInitialized) await this.flush();
  }

  private async insert(batch: FinishedRequest[]): Promise<void> {
    await this.dataSource.query(INSERT_ROWS, [JSON.stringify(batch.map(rowOf))]);
  }
}

/**
 * The batch is one JSON parameter: an array of rows, each an array of values in the order below
 * (no keys), every duration in whole microseconds, which PostgreSQL turns back into ms. Why:
 * the flush is most of what an untraced request costs the server beyond the request itself, and
 * rows of named fields took about 40 % more of the process (10 µs a request against 6 at 2,000
 * requests/s: keys double a row's text, and a fractional double prints slowly;
 * bench/results/2026-11-30-request-log-rows.md). `jsonb` so that each `->>` by position is an
 * index, not a scan of the row's text. The phases stay in µs, as `phase_us` (migration 1765840000000).
 */
const INSERT_ROWS = `
  INSERT INTO request_log (workspace_id, request_id, api_key_id, deployment_id, shared_model, replica_id, batch_id, model, endpoint, stream,
    outcome, error_code, finish_reason, prompt_tokens, completion_tokens, cached_tokens, started_at, latency_ms, ttft_ms, trace_id, phase_us,
    adapter_id, adapter_name, request_body, request_body_truncated, response_body, response_body_truncated)
  SELECT r->>0, r->>1, r->>2, r->>3, r->>4, r->>5, r->>6, r->>7, r->>8, (r->>9)::boolean,
    r->>10, r->>11, r->>12, (r->>13)::int, (r->>14)::int, (r->>15)::int, to_timestamp((r->>16)::float8 / 1000), (r->>17)::float8 / 1000, (r->>18)::float8 / 1000, r->>19,
    CASE WHEN r->>20 IS NOT NULL THEN ARRAY[(r->>20)::bigint, (r->>21)::bigint, (r->>22)::bigint, (r->>23)::bigint, (r->>24)::bigint] END,
    r->>25, r->>26, r->>27, COALESCE((r->>28)::boolean, false), r->>29, COALESCE((r->>30)::boolean, false)
  FROM jsonb_array_elements($1::jsonb) AS r`;

type Cell = string | number | boolean | null;

/** A duration in ms as whole microseconds (null stays null, and so does a step never reached). */
function micros(ms: number | null | undefined): number | null {
  return ms === null || ms === undefined ? null : Math.round(ms * 1000);
}

/** An entry's row, in INSERT_ROWS's order; a guest's names no deployment and no replica. */
function rowOf(request: FinishedRequest): Cell[] {
  const owner = request.sharedModel === null;
  const { phases, content, adapter } = request;
  const row: Cell[] = [
    request.workspaceId, request.requestId, request.apiKeyId, owner ? request.deploymentId : null, request.sharedModel,
    owner ? request.replicaId : null, request.batchId ?? null, request.model, request.endpoint, request.stream,
    request.outcome, request.errorCode, request.finishReason, request.promptTokens, request.completionTokens, request.cachedTokens,
    request.startedAt, micros(request.latencyMs), micros(request.ttftMs), request.traceId,
    // admittedMs is set whenever phases are: the SQL reads its absence as "no phases".
    phases ? micros(phases.admittedMs) ?? 0 : null, micros(phases?.dispatchedMs), micros(phases?.startedMs), micros(phases?.firstTokenMs), micros(phases?.endedMs),
    adapter ? adapter.id : null, adapter ? adapter.name : null,
  ];
  if (content) {
    row.push(storableText(content.request), content.requestTruncated,
      content.response ? storableText(content.response) : null, content.responseTruncated);
  }
  return row;
}

/**
 * A body as text PostgreSQL stores: bytes that are not UTF-8 (or a character cut at the cap)
 * become U+FFFD, and so does NUL, which a text column refuses.
 */
export function storableText(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  return text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text;
}
