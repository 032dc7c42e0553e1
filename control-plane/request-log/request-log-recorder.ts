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
    const rows = batch.map(rowOf);
    await this.dataSource.query(`
      INSERT INTO request_log (workspace_id, request_id, api_key_id, deployment_id, shared_model, replica_id, batch_id, model, endpoint, stream,
        outcome, error_code, finish_reason, prompt_tokens, completion_tokens, cached_tokens, started_at, latency_ms, ttft_ms, trace_id, phases,
        request_body, request_body_truncated, response_body, response_body_truncated, adapter_id, adapter_name)
      SELECT w, rid, k, d, sm, rep, b, model, ep, st, o, ec, fr, pt, ct, cat, to_timestamp(sa / 1000.0), lat, ttft, tr, ph::jsonb,
        rq, COALESCE(rqt, false), rs, COALESCE(rst, false), ad, adn
      FROM json_to_recordset($1::json) AS x(w text, rid text, k text, d text, sm text, rep text, b text, model text, ep text, st boolean,
        o text, ec text, fr text, pt int, ct int, cat int, sa float8, lat float8, ttft float8, tr text, ph json,
        rq text, rqt boolean, rs text, rst boolean, ad text, adn text)`,
    [JSON.stringify(rows)]);
  }
}

/** An entry's row; a guest's names no deployment and no replica. */
function rowOf(request: FinishedRequest): Record<string, unknown> {
  const owner = request.sharedModel === null;
  const content = request.content;
  return {
    w: request.workspaceId, rid: request.requestId, k: request.apiKeyId, d: owner ? request.deploymentId : null, sm: request.sharedModel,
    rep: owner ? request.replicaId : null, b: request.batchId ?? null, model: request.model, ep: request.endpoint, st: request.stream,
    o: request.outcome, ec: request.errorCode, fr: request.finishReason, pt: request.promptTokens, ct: request.completionTokens, cat: request.cachedTokens,
    sa: request.startedAt, lat: request.latencyMs, ttft: request.ttftMs, tr: request.traceId, ph: request.phases,
    ...(request.adapter ? { ad: request.adapter.id, adn: request.adapter.name } : {}),
    ...(content ? {
      rq: storableText(content.request), rqt: content.requestTruncated,
      rs: content.response ? storableText(content.response) : null, rst: content.responseTruncated,
    } : {}),
  };
}

/**
 * A body as text PostgreSQL stores: bytes that are not UTF-8 (or a character cut at the cap)
 * become U+FFFD, and so does NUL, which a text column refuses.
 */
export function storableText(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  return text.includes('\0') ? text.replaceAll('\0', '\uFFFD') : text;
}
