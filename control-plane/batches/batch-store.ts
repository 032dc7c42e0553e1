import type { DataSource, EntityManager, Repository } from 'typeorm';
import { AppError } from '../errors/app-error';
import { shortened } from '../errors/quote-value';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import { Deployment } from '../deployments/deployment.entity';
import { Batch, type BatchEnd, type BatchError, type BatchLineStatus, type BatchStatus } from './batch.entities';
import { cursorPage, type CursorPage, type PageRequest } from './cursor-page';
import type { InputLines } from './batch-input-file';
import { errorLine, LINE_ERROR_MESSAGES, type BatchLineErrorCode } from './batch-results';

declare module '../events/control-plane-events' {
  interface ControlPlaneEventMap {
    /**
     * A batch changed status, or its request counts moved (at most every
     * `BATCH_PROGRESS_INTERVAL_MS` per batch), here or on another server (re-read on its notification).
     */
    batchUpdated: [Batch];
  }
}

/** Runs inside the transaction that made a batch terminal (the webhook outbox writes its event here). */
export type BatchTerminalHook = (manager: EntityManager, batch: Batch) => Promise<void>;

/** A line a server claimed, with what running it needs. */
export interface ClaimedLine {
  readonly batchId: string;
  readonly lineIndex: number;
  readonly customId: string;
  /** Where its body lies in the batch's input file (read when it runs: batch-input-reader.ts). */
  readonly bodyOffset: number;
  readonly bodyLength: number;
  /** The body itself, only on lines stored before bodies stayed in the file (migration 1765200000000). */
  readonly body: string | null;
  /** This run's number (1 or 2): the fence of every later write of the claim. */
  readonly attempt: number;
}

/** What a finished line adds to its batch. */
export interface LineTokens {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly totalTokens: number;
  readonly cachedTokens: number;
}

const NO_TOKENS: LineTokens = { promptTokens: 0, completionTokens: 0, totalTokens: 0, cachedTokens: 0 };
const BATCH_ID = /^batch_[0-9a-f]{24}$/;
/** Lines inserted per statement when a batch is validated. */
const INSERT_CHUNK = 5_000;
/** Answers written by one statement at most. */
const ANSWERS_PER_WRITE = 500;

interface PendingAnswer {
  readonly line: ClaimedLine;
  readonly owner: string;
  readonly status: 'succeeded' | 'failed';
  readonly result: string;
  readonly tokens: LineTokens;
  resolve(written: boolean): void;
  reject(error: unknown): void;
}

/**
 * The batches and batch_lines tables and their state machine. Every change is one conditional
 * UPDATE: a line's result is written only while the claim that ran it still holds it (status
 * `running`, same server, same attempt), so a line is answered at most once even when its
 * lease lapsed and another server ran it again; a batch changes status only from the status
 * its writer read. Terminal changes run the terminal hooks in the same transaction.
 */
export class BatchStore {
  readonly repository: Repository<Batch>;
  private readonly terminalHooks: BatchTerminalHook[] = [];
  /** Batches re-emitted from a peer's notification are not announced back. */
  private readonly fromPeers = new WeakSet<Batch>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly events: ControlPlaneEvents,
    private readonly notifier: Pick<ClusterNotifier, 'publish' | 'on'>,
  ) {
    this.repository = dataSource.getRepository(Batch);
    notifier.on('batch', (id) => void this.changedElsewhere(id));
  }

  onTerminal(hook: BatchTerminalHook): void {
    this.terminalHooks.push(hook);
  }

  async find(id: string): Promise<Batch | null> {
    if (!BATCH_ID.test(id)) return null;
    return await this.repository.findOne({ where: { id } });
  }

  /** The batch if it belongs to the workspace (and deployment, when given); 404 otherwise, whoever it belongs to. */
  async owned(workspaceId: string, deploymentId: string | undefined, id: string): Promise<Batch> {
    const batch = await this.find(id);
    if (!batch || batch.workspaceId !== workspaceId || (deploymentId !== undefined && batch.deploymentId !== deploymentId)) {
      throw new AppError('not_found', `no batch '${shortened(id)}' here`, { param: 'id' });
    }
    return batch;
  }

  /** Newest first. */
  async list(workspaceId: string, deploymentId: string | undefined, request: PageRequest): Promise<CursorPage<Batch>> {
    const query = this.repository.createQueryBuilder('batch').where('batch.workspace_id = :workspaceId', { workspaceId });
    if (deploymentId) query.andWhere('batch.deployment_id = :deploymentId', { deploymentId });
    return await cursorPage(query, 'batch', 'desc', request, async (id) => {
      const batch = await this.find(id);
      return batch && batch.workspaceId === workspaceId && (!deploymentId || batch.deploymentId === deploymentId) ? batch : null;
    }, 'batch');
  }

  /** Inserts the batch; `before` runs first in the same transaction (the tenant budget's count and check). */
  async insert(batch: Batch, before?: (manager: EntityManager) => Promise<void>): Promise<Batch> {
    if (before) {
      await this.repository.manager.transaction(async (manager) => {
        await before(manager);
        await manager.insert(Batch, batch);
      });
    } else {
      await this.repository.insert(batch);
    }
    this.changed(batch);
    return batch;
  }

  /** Tells subscribers here and on every server that the batch changed (re-read now). */
  async announce(id: string): Promise<void> {
    const batch = await this.find(id);
    if (batch) this.changed(batch);
  }

  // ---- validation -------------------------------------------------------------------------

  /** A `validating` batch nobody works on (or whose server's lease lapsed), now leased to `owner`. */
  async claimValidation(owner: string, leaseMs: number): Promise<Batch | null> {
    return await this.claimBatch(owner, leaseMs, `status = 'validating'`);
  }

  /**
   * The file was valid: its lines are stored (those the endpoint refuses already failed, with
   * their answer) and the batch is `in_progress`, in one transaction; or straight `finalizing`
   * when no line is left to run. Null when the batch is no longer this server's to validate.
   */
  async startLines(batchId: string, owner: string, lines: InputLines, refusedResults: Map<number, string>): Promise<Batch | null> {
    const started = await this.dataSource.transaction(async (manager) => {
      const [locked] = await manager.query(`SELECT id FROM batches WHERE id = $1 AND status = 'validating' AND lease_owner = $2 FOR UPDATE`, [batchId, owner]);
      if (!locked) return null;
      // Where each body lies in the file, not the body: a batch's input stays in the object store.
      for (let start = 0; start < lines.count; start += INSERT_CHUNK) {
        const indexes = lines.indexes.slice(start, start + INSERT_CHUNK);
        await manager.query(`
          INSERT INTO batch_lines (batch_id, line_index, custom_id, body_offset, body_length, status, result, finished_at)
          SELECT $1, line_index, custom_id, body_offset, body_length, status, result, CASE WHEN status = 'failed' THEN clock_timestamp() END
          FROM unnest($2::int[], $3::text[], $4::bigint[], $5::int[], $6::text[], $7::text[]) AS line(line_index, custom_id, body_offset, body_length, status, result)`,
        [batchId, indexes, lines.customIds.slice(start, start + INSERT_CHUNK), lines.bodyOffsets.slice(start, start + INSERT_CHUNK),
          lines.bodyLengths.slice(start, start + INSERT_CHUNK), indexes.map((index) => (refusedResults.has(index) ? 'failed' : 'pending')),
          indexes.map((index) => refusedResults.get(index) ?? null)]);
      }
      const runnable = lines.count - refusedResults.size;
      await manager.query(`
        UPDATE batches SET total_count = $2, failed_count = $3, in_progress_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL,
          status = CASE WHEN $4::int = 0 THEN 'finalizing' ELSE 'in_progress' END,
          finalizing_at = CASE WHEN $4::int = 0 THEN clock_timestamp() END,
          end_status = CASE WHEN $4::int = 0 THEN 'completed' END
        WHERE id = $1`, [batchId, lines.count, refusedResults.size, runnable]);
      return await manager.findOne(Batch, { where: { id: batchId } });
    });
    if (started) this.changed(started);
    return started;
  }

  /** The input file was invalid: the batch ends `failed` with its errors (nothing was stored or run). */
  async failValidation(batchId: string, owner: string, errors: BatchError[]): Promise<Batch | null> {
    return await this.end(batchId, `status = 'validating' AND lease_owner = $2`, [owner], {
      status: 'failed', errors, failedAt: () => 'clock_timestamp()',
    });
  }

  // ---- lines ------------------------------------------------------------------------------

  /** Deployments with `in_progress` batches that have lines waiting, whose deployment is not paused. */
  async deploymentsWithPendingLines(): Promise<string[]> {
    const rows: Array<{ deployment_id: string }> = await this.dataSource.query(`
      SELECT DISTINCT b.deployment_id FROM batches b JOIN deployments d ON d.id = b.deployment_id
      WHERE b.status = 'in_progress' AND d.status IN ('Creating', 'Running')
        AND EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.status = 'pending')`);
    return rows.map((row) => row.deployment_id);
  }

  /** The deployment's `in_progress` batches, oldest first (lines are taken in this order); none while it is paused. */
  async openBatches(deploymentId: string): Promise<Batch[]> {
    return await this.repository.createQueryBuilder('batch')
      .innerJoin(Deployment, 'deployment', `deployment.id = batch.deployment_id AND deployment.status IN ('Creating', 'Running')`)
      .where(`batch.deployment_id = :deploymentId AND batch.status = 'in_progress'`, { deploymentId })
      .orderBy('batch.created_at', 'ASC').addOrderBy('batch.id', 'ASC').getMany();
  }

  /**
   * Takes up to `limit` pending lines of the batch, in file order, for `owner`: each one
   * `running` under a lease, its attempt counted. SKIP LOCKED: servers claiming at once each
   * get other lines. Nothing once the batch stopped taking lines (cancelled, expired).
   * The lines are picked in a MATERIALIZED CTE: as `UPDATE … WHERE line_index IN (SELECT …
   * LIMIT n FOR UPDATE SKIP LOCKED)`, PostgreSQL may re-run the sub-select per row with stale
   * statistics and claim every pending line (seen: 10,000 instead of 4 on a second batch).
   */
  async claimLines(batchId: string, owner: string, leaseMs: number, limit: number): Promise<ClaimedLine[]> {
    const rows: Array<{
      batch_id: string; line_index: number; custom_id: string; body: string | null; body_offset: string | null; body_length: number | null; attempts: number;
    }> = await this.unwrap(this.dataSource.query(`
      WITH picked AS MATERIALIZED (
        SELECT line_index FROM batch_lines
        WHERE batch_id = $1 AND status = 'pending' AND EXISTS (SELECT 1 FROM batches WHERE id = $1 AND status = 'in_progress')
        ORDER BY line_index LIMIT $4 FOR UPDATE SKIP LOCKED)
      UPDATE batch_lines l SET status = 'running', attempts = l.attempts + 1, claimed_by = $2,
        lease_expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
      FROM picked WHERE l.batch_id = $1 AND l.line_index = picked.line_index
      RETURNING l.batch_id, l.line_index, l.custom_id, l.body, l.body_offset, l.body_length, l.attempts`, [batchId, owner, leaseMs, limit]));
    return rows.sort((a, b) => a.line_index - b.line_index).map((row) => ({
      batchId: row.batch_id, lineIndex: row.line_index, customId: row.custom_id, body: row.body,
      bodyOffset: Number(row.body_offset ?? 0), bodyLength: row.body_length ?? 0, attempt: row.attempts,
    }));
  }

  /** A claimed line that did not start (its key's token budget, its replica gone before the job went out): pending again, the attempt not counted. */
  async releaseLine(line: ClaimedLine, owner: string): Promise<void> {
    await this.dataSource.query(`
      UPDATE batch_lines SET status = 'pending', attempts = attempts - 1, claimed_by = NULL, lease_expires_at = NULL
      WHERE batch_id = $1 AND line_index = $2 AND status = 'running' AND claimed_by = $3 AND attempts = $4`,
    [line.batchId, line.lineIndex, owner, line.attempt]);
  }

  /**
   * Writes a line's answer (its output or error file line) and adds it to the batch's counts
   * and tokens, atomically, only while this claim still holds the line. False: the line had
   * been taken from this claim (lease lapsed), and nothing was written. Answers that arrive
   * while a write is in flight go together in the next one (group commit): one statement for
   * many lines, no wait added when lines are few.
   */
  finishLine(line: ClaimedLine, owner: string, status: 'succeeded' | 'failed', result: string, tokens: LineTokens = NO_TOKENS): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      this.finishing.push({ line, owner, status, result, tokens, resolve, reject });
      if (!this.writingAnswers) void this.writeAnswers();
    });
  }

  private readonly finishing: PendingAnswer[] = [];
  private writingAnswers = false;

  private async writeAnswers(): Promise<void> {
    this.writingAnswers = true;
    try {
      while (this.finishing.length > 0) {
        const answers = this.finishing.splice(0, ANSWERS_PER_WRITE);
        try {
          const written = await this.writeAnswerGroup(answers);
          for (const answer of answers) answer.resolve(written.has(`${answer.line.batchId}:${answer.line.lineIndex}:${answer.owner}`));
        } catch (error) {
          for (const answer of answers) answer.reject(error);
        }
      }
    } finally {
      this.writingAnswers = false;
    }
  }

  /** One statement: the lines still held by their claims take their answers, and their batches the counts. */
  private async writeAnswerGroup(answers: PendingAnswer[]): Promise<Set<string>> {
    const column = <T>(pick: (answer: PendingAnswer) => T) => answers.map(pick);
    const rows: Array<{ batch_id: string; line_index: number; owner: string }> = await this.dataSource.query(`
      WITH answer AS (
        SELECT * FROM unnest($1::text[], $2::int[], $3::int[], $4::text[], $5::text[], $6::text[], $7::int[], $8::int[], $9::int[], $10::int[])
          AS answer(batch_id, line_index, attempt, owner, status, result, prompt_tokens, completion_tokens, total_tokens, cached_tokens)
      ), done AS (
        UPDATE batch_lines l SET status = answer.status, result = answer.result, prompt_tokens = answer.prompt_tokens,
          completion_tokens = answer.completion_tokens, total_tokens = answer.total_tokens,
          claimed_by = NULL, lease_expires_at = NULL, finished_at = clock_timestamp()
        FROM answer
        WHERE l.batch_id = answer.batch_id AND l.line_index = answer.line_index AND l.status = 'running'
          AND l.claimed_by = answer.owner AND l.attempts = answer.attempt
        RETURNING l.batch_id, l.line_index, answer.owner, answer.status, answer.prompt_tokens, answer.completion_tokens,
          answer.total_tokens, answer.cached_tokens
      ), counted AS (
        UPDATE batches b SET completed_count = b.completed_count + sums.added_completed, failed_count = b.failed_count + sums.added_failed,
          input_tokens = b.input_tokens + sums.added_input, output_tokens = b.output_tokens + sums.added_output,
          total_tokens = b.total_tokens + sums.added_total, cached_tokens = b.cached_tokens + sums.added_cached
        FROM (SELECT done.batch_id AS answered_batch, count(*) FILTER (WHERE done.status = 'succeeded')::int AS added_completed,
                count(*) FILTER (WHERE done.status = 'failed')::int AS added_failed, sum(done.prompt_tokens) AS added_input,
                sum(done.completion_tokens) AS added_output, sum(done.total_tokens) AS added_total, sum(done.cached_tokens) AS added_cached
              FROM done GROUP BY done.batch_id) sums
        WHERE b.id = sums.answered_batch
        RETURNING b.id
      )
      SELECT batch_id, line_index, owner FROM done`,
    [column((answer) => answer.line.batchId), column((answer) => answer.line.lineIndex), column((answer) => answer.line.attempt),
      column((answer) => answer.owner), column((answer) => answer.status), column((answer) => answer.result),
      column((answer) => answer.tokens.promptTokens), column((answer) => answer.tokens.completionTokens),
      column((answer) => answer.tokens.totalTokens), column((answer) => answer.tokens.cachedTokens)]);
    return new Set(rows.map((row) => `${row.batch_id}:${row.line_index}:${row.owner}`));
  }

  /**
   * A line whose job was lost (its replica crashed or drained, before answering): pending
   * again if it ran once, else failed (`replica_lost`): a line never runs a third time.
   * Null when this claim no longer holds it.
   */
  async lineLost(line: ClaimedLine, owner: string, tokens: LineTokens = NO_TOKENS): Promise<'requeued' | 'failed' | null> {
    if (line.attempt < 2) {
      const rows = await this.unwrap(this.dataSource.query(`
        UPDATE batch_lines SET status = 'pending', claimed_by = NULL, lease_expires_at = NULL
        WHERE batch_id = $1 AND line_index = $2 AND status = 'running' AND claimed_by = $3 AND attempts = $4 RETURNING line_index`,
      [line.batchId, line.lineIndex, owner, line.attempt]));
      return rows.length > 0 ? 'requeued' : null;
    }
    const written = await this.finishLine(line, owner, 'failed', errorLine(line.customId, 'replica_lost', LINE_ERROR_MESSAGES.replica_lost), tokens);
    return written ? 'failed' : null;
  }

  /**
   * The lines the owner runs now (`lines`: only those, so a line it lost track of lapses and is
   * recovered) and the batches it validates or finalizes stay claimed: another server may take
   * over only after the lease lapses.
   */
  async renewLeases(owner: string, leaseMs: number, lines: ReadonlyArray<Pick<ClaimedLine, 'batchId' | 'lineIndex'>>): Promise<void> {
    if (lines.length > 0) {
      await this.dataSource.query(`
        UPDATE batch_lines l SET lease_expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
        FROM unnest($3::text[], $4::int[]) AS held(batch_id, line_index)
        WHERE l.batch_id = held.batch_id AND l.line_index = held.line_index AND l.status = 'running' AND l.claimed_by = $1`,
      [owner, leaseMs, lines.map((line) => line.batchId), lines.map((line) => line.lineIndex)]);
    }
    await this.dataSource.query(`
      UPDATE batches SET lease_expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
      WHERE lease_owner = $1 AND status IN ('validating', 'finalizing', 'cancelling')`, [owner, leaseMs]);
  }

  /**
   * Lines whose server stopped renewing their lease (it crashed, or lost the database): pending
   * again after one run, failed (`replica_lost`) after two, with the batch's count, in one
   * statement. Returns the batches whose lines changed.
   */
  async recoverLostLines(): Promise<string[]> {
    const rows: Array<{ batch_id: string }> = await this.unwrap(this.dataSource.query(`
      WITH picked AS MATERIALIZED (
        SELECT batch_id, line_index FROM batch_lines WHERE status = 'running' AND lease_expires_at < clock_timestamp()
        LIMIT 1000 FOR UPDATE SKIP LOCKED
      ), lost AS (
        UPDATE batch_lines SET claimed_by = NULL, lease_expires_at = NULL,
          status = CASE WHEN attempts >= 2 THEN 'failed' ELSE 'pending' END,
          finished_at = CASE WHEN attempts >= 2 THEN clock_timestamp() END,
          result = CASE WHEN attempts >= 2 THEN json_build_object(
            'id', 'batch_req_' || substr(md5(random()::text || clock_timestamp()::text), 1, 24), 'custom_id', custom_id, 'response', NULL,
            'error', json_build_object('code', 'replica_lost', 'message', $1::text))::text END
        WHERE (batch_id, line_index) IN (SELECT batch_id, line_index FROM picked)
        RETURNING batch_id, status
      ), counts AS (
        UPDATE batches b SET failed_count = failed_count + failed.n
        FROM (SELECT batch_id, count(*)::int AS n FROM lost WHERE status = 'failed' GROUP BY batch_id) failed
        WHERE b.id = failed.batch_id
        RETURNING b.id
      )
      SELECT DISTINCT batch_id FROM lost`, [LINE_ERROR_MESSAGES.replica_lost]));
    return rows.map((row) => row.batch_id);
  }

  /** Statuses of these batches now (a server checks the batches of the lines it runs). */
  async statuses(batchIds: string[]): Promise<Map<string, BatchStatus>> {
    if (batchIds.length === 0) return new Map();
    const rows: Array<{ id: string; status: BatchStatus }> = await this.dataSource.query(`SELECT id, status FROM batches WHERE id = ANY($1)`, [batchIds]);
    return new Map(rows.map((row) => [row.id, row.status]));
  }

  // ---- the end of a batch -------------------------------------------------------------------

  /** An `in_progress` batch with no line left to run or running moves to `finalizing`. */
  async finishIfDone(batchId: string): Promise<Batch | null> {
    return await this.transition(batchId, `status = 'in_progress' AND NOT EXISTS (
      SELECT 1 FROM batch_lines WHERE batch_id = $1 AND status IN ('pending', 'running'))`, [], {
      status: 'finalizing', endStatus: 'completed', finalizingAt: () => 'clock_timestamp()',
    });
  }

  /** Every `in_progress` batch with no line left to run or running moves to `finalizing` (the sweep's catch-all). */
  async finishAllDone(): Promise<string[]> {
    const rows: Array<{ id: string }> = await this.unwrap(this.dataSource.query(`
      UPDATE batches b SET status = 'finalizing', end_status = 'completed', finalizing_at = clock_timestamp()
      WHERE b.status = 'in_progress' AND NOT EXISTS (SELECT 1 FROM batch_lines l WHERE l.batch_id = b.id AND l.status IN ('pending', 'running'))
      RETURNING b.id`));
    for (const { id } of rows) await this.announce(id);
    return rows.map((row) => row.id);
  }

  /** Batches past their completion window stop taking lines: `finalizing` towards `expired`. */
  async expireOverdue(): Promise<Batch[]> {
    const rows: Array<{ id: string }> = await this.unwrap(this.dataSource.query(`
      UPDATE batches SET status = 'finalizing', end_status = 'expired', finalizing_at = clock_timestamp(), lease_owner = NULL, lease_expires_at = NULL
      WHERE status IN ('validating', 'in_progress') AND expires_at < clock_timestamp() RETURNING id`));
    const expired: Batch[] = [];
    for (const { id } of rows) {
      const batch = await this.find(id);
      if (batch) {
        this.changed(batch);
        expired.push(batch);
      }
    }
    return expired;
  }

  /**
   * `POST /batches/{id}/cancel`: a validating or running batch takes no more lines and is
   * `cancelling` until its running lines end and its files are written. Asking again while it
   * is cancelling changes nothing; any other status is 409.
   */
  async cancel(workspaceId: string, deploymentId: string | undefined, id: string): Promise<Batch> {
    const batch = await this.owned(workspaceId, deploymentId, id);
    const cancelled = await this.transition(batch.id, `status IN ('validating', 'in_progress')`, [], {
      status: 'cancelling', endStatus: 'cancelled', cancellingAt: () => 'clock_timestamp()', leaseOwner: null, leaseExpiresAt: null,
    });
    if (cancelled) return cancelled;
    const current = await this.owned(workspaceId, deploymentId, id);
    if (current.status === 'cancelling' || current.status === 'cancelled') return current;
    throw new AppError('batch_not_cancellable', `batch '${id}' is ${current.status}: only a validating or in-progress batch can be cancelled`, { param: 'id' });
  }

  /**
   * A `finalizing` or `cancelling` batch nobody finalizes, none of whose lines is still
   * running under a live lease, now leased to `owner` to write its files.
   */
  async claimFinalization(owner: string, leaseMs: number): Promise<Batch | null> {
    return await this.claimBatch(owner, leaseMs, `status IN ('finalizing', 'cancelling') AND NOT EXISTS (
      SELECT 1 FROM batch_lines l WHERE l.batch_id = batches.id AND l.status = 'running' AND l.lease_expires_at >= clock_timestamp())`);
  }

  /**
   * The lines a batch that stopped early never ran (pending, or running under a lease that
   * lapsed: their server is gone): failed with `code`, so they go to the error file. One
   * statement, their error lines built by PostgreSQL (as recoverLostLines builds its own): a
   * cancelled batch of a million lines used to bring every line into the server to write them.
   */
  async failPendingLines(batchId: string, code: BatchLineErrorCode): Promise<void> {
    await this.dataSource.query(`
      WITH ended AS (
        UPDATE batch_lines SET status = 'failed', finished_at = clock_timestamp(), claimed_by = NULL, lease_expires_at = NULL,
          result = json_build_object(
            'id', 'batch_req_' || substr(md5(random()::text || clock_timestamp()::text || line_index::text), 1, 24), 'custom_id', custom_id,
            'response', NULL, 'error', json_build_object('code', $2::text, 'message', $3::text))::text
        WHERE batch_id = $1 AND (status = 'pending' OR (status = 'running' AND lease_expires_at < clock_timestamp()))
        RETURNING 1
      )
      UPDATE batches SET failed_count = failed_count + (SELECT count(*) FROM ended) WHERE id = $1`, [batchId, code, LINE_ERROR_MESSAGES[code]]);
  }

  /** A batch's answered lines in file order, a page at a time (`after`: the last line index seen). */
  async results(batchId: string, after: number, limit: number): Promise<Array<{ lineIndex: number; status: BatchLineStatus; result: string | null }>> {
    const rows: Array<{ line_index: number; status: BatchLineStatus; result: string | null }> = await this.dataSource.query(`
      SELECT line_index, status, result FROM batch_lines WHERE batch_id = $1 AND line_index > $2 ORDER BY line_index LIMIT $3`, [batchId, after, limit]);
    return rows.map((row) => ({ lineIndex: row.line_index, status: row.status, result: row.result }));
  }

  /**
   * The batch's files are written: it takes its terminal status with their ids, and the rows
   * of the files (`insertFiles`) and its webhook event are written in the same transaction.
   * Null when the batch is no longer this server's to finalize (nothing was written).
   */
  async complete(
    batchId: string, owner: string, end: BatchEnd, files: { outputFileId: string | null; errorFileId: string | null },
    insertFiles: (manager: EntityManager) => Promise<void>,
  ): Promise<Batch | null> {
    const at = () => 'clock_timestamp()';
    return await this.end(batchId, `status IN ('finalizing', 'cancelling') AND lease_owner = $2`, [owner], {
      status: end, outputFileId: files.outputFileId, errorFileId: files.errorFileId,
      ...(end === 'completed' ? { completedAt: at } : end === 'expired' ? { expiredAt: at } : { cancelledAt: at }),
    }, insertFiles);
  }

  // ---- helpers ----------------------------------------------------------------------------

  private async claimBatch(owner: string, leaseMs: number, condition: string): Promise<Batch | null> {
    const rows: Array<{ id: string }> = await this.unwrap(this.dataSource.query(`
      UPDATE batches SET lease_owner = $1, lease_expires_at = clock_timestamp() + $2::bigint * interval '1 millisecond'
      WHERE id = (SELECT id FROM batches WHERE ${condition} AND (lease_expires_at IS NULL OR lease_expires_at < clock_timestamp())
                  ORDER BY created_at, id FOR UPDATE SKIP LOCKED LIMIT 1)
      RETURNING id`, [owner, leaseMs]));
    return rows.length > 0 ? await this.find(rows[0].id) : null;
  }

  /** One conditional status change (`where` over `$1` = the id and `params` from `$2`), announced when it happened. */
  private async transition(id: string, where: string, params: unknown[], changes: Record<string, unknown>): Promise<Batch | null> {
    const result = await this.repository.createQueryBuilder().update(Batch).set(changes)
      .where(`id = :id AND ${renumber(where, params)}`, { id, ...named(params) }).execute();
    if (!result.affected) return null;
    const batch = await this.find(id);
    if (batch) this.changed(batch);
    return batch;
  }

  /** A terminal change, with the terminal hooks (and `also`) in its transaction. */
  private async end(
    id: string, where: string, params: unknown[], changes: Record<string, unknown>, also?: (manager: EntityManager) => Promise<void>,
  ): Promise<Batch | null> {
    const ended = await this.dataSource.transaction(async (manager) => {
      const result = await manager.createQueryBuilder().update(Batch).set({ ...changes, leaseOwner: null, leaseExpiresAt: null })
        .where(`id = :id AND ${renumber(where, params)}`, { id, ...named(params) }).execute();
      if (!result.affected) return null;
      await also?.(manager);
      const batch = (await manager.findOne(Batch, { where: { id } }))!;
      for (const hook of this.terminalHooks) await hook(manager, batch);
      return batch;
    });
    if (ended) this.changed(ended);
    return ended;
  }

  /** `UPDATE … RETURNING` through `query` answers [rows, count] on PostgreSQL. */
  private async unwrap<T>(query: Promise<unknown>): Promise<T[]> {
    const rows = (await query) as unknown[];
    return (Array.isArray(rows[0]) ? rows[0] : rows) as T[];
  }

  private changed(batch: Batch): void {
    this.events.emit('batchUpdated', batch);
    if (!this.fromPeers.has(batch)) this.notifier.publish('batch', batch.id);
  }

  private async changedElsewhere(id: string): Promise<void> {
    const batch = await this.find(id).catch(() => null);
    if (!batch) return;
    this.fromPeers.add(batch);
    this.events.emit('batchUpdated', batch);
  }
}

/** `$2`, `$3`… of a condition as TypeORM named parameters (`:p2`, …); `$1` is the id. */
function renumber(where: string, params: unknown[]): string {
  return where.replace(/\$(\d+)/g, (_match, index: string) => {
    if (index !== '1' && Number(index) - 2 >= params.length) throw new Error(`condition names $${index} but has ${params.length} parameters`);
    return index === '1' ? ':id' : `:p${index}`;
  });
}

function named(params: unknown[]): Record<string, unknown> {
  return Object.fromEntries(params.map((value, index) => [`p${index + 2}`, value]));
}
