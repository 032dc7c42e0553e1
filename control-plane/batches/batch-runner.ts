import type { Logger } from 'pino';
import type { ApiKey } from '../api-keys/api-key.entity';
import type { Catalog, CatalogModel } from '../catalog/catalog';
import type { AgentConnection, SlotHold } from '../dispatch/agent-connection';
import type { CacheSalts } from '../dispatch/cache-salts';
import type { Dispatcher } from '../dispatch/dispatcher';
import type { DispatchRequest, Job, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { ClusterNotifier } from '../events/cluster-notifier';
import type { ControlPlaneEvents } from '../events/control-plane-events';
import type { AdapterAddressing, AddressedAdapter } from '../pipeline/adapter-addressing';
import { checkModelField } from '../pipeline/admission';
import type { InferencePipeline } from '../pipeline/inference-pipeline';
import type { WorkTicket } from '../pipeline/work-ticket';
import type { RateLimiter, TokenHold } from '../rate-limits/rate-limit-decision';
import { takesWork } from '../placement/filters';
import { lineReplica } from '../placement/line-replica';
import { mostFree } from '../placement/slots';
import type { JobKind, Usage } from '../../proto/worker/v1';
import type { Batch, BatchEndpoint } from './batch.entities';
import type { BatchConfig } from './batch-config';
import type { BatchInputReader } from './batch-input-reader';
import type { BatchLineHandler, LineRun } from './batch-line-handler';
import { BatchLineResults, type BatchLineResultsParts, settleLine, USAGE_ENDPOINTS } from './batch-line-results';
import type { BatchLineErrorCode } from './batch-results';
import type { ClaimedLine } from './batch-store';
import { BatchUpkeep, type BatchUpkeepParts } from './batch-upkeep';
import { linesKeptLiveWaiting, linesInTheWay, liveWaiting } from './batch-capacity';
import { BatchWindow } from './batch-window';
import { readLineInput } from './line-input';
import { withoutContent } from './without-content';
import { parentOf, SpanKind, type Span, type Tracing } from '../../common/tracing/tracing';
import { ATTR } from '../../common/tracing/span-attributes';

/** What the runner needs of a key: its day budget (a batch's tokens count toward its creator key's TPD). */
export type BatchKey = Pick<ApiKey, 'id' | 'rpmLimit' | 'tpdLimit'>;

export interface BatchRunnerParts extends BatchUpkeepParts, BatchLineResultsParts {
  readonly dispatcher: Pick<Dispatcher, 'connections' | 'dispatchTo' | 'onCapacity'>;
  readonly catalog: Pick<Catalog, 'find'>;
  readonly lines: BatchLineHandler;
  /** Where lines' bodies are read from: their batch's input file, in the object store. */
  readonly inputs: Pick<BatchInputReader, 'body'>;
  readonly rateLimiter: Pick<RateLimiter, 'holdWithin' | 'settle'>;
  /** The key row, revoked or not (null once its workspace is gone). */
  readonly keys: (apiKeyId: string) => Promise<BatchKey | null>;
  readonly notifier: Pick<ClusterNotifier, 'onReset' | 'instanceId'>;
  readonly events: ControlPlaneEvents;
  /** A chat or completions line carries its batch's workspace's salt, as that workspace's live requests do. */
  readonly cacheSalts: Pick<CacheSalts, 'of'>;
  /** A line's ticket: the pipeline settles its TPD hold and writes its usage record, as for every request. */
  readonly tickets: Pick<InferencePipeline, 'batchLine'>;
  /** A line's `model` naming an adapter attached to the deployment (docs/adapters.md#addressing); absent: only the base model. */
  readonly adapters?: Pick<AdapterAddressing, 'onDeployment'>;
  /** This server's tracing; null or absent when off (no line makes a span). */
  readonly tracing?: Tracing | null;
  /** The clock in milliseconds lines are timed by. @default Date.now */
  readonly now?: () => number;
}

export type BatchRunnerOptions = Pick<BatchConfig, 'lineLeaseMs' | 'lineTimeoutMs' | 'pollIntervalMs' | 'sweepIntervalMs' | 'progressIntervalMs' | 'tpdRetryMs'>;

/** One deployment's batch work on this server. */
interface Lane {
  readonly deploymentId: string;
  /** Created with the first replica seen here. */
  window: BatchWindow | null;
  readonly running: Set<RunningLine>;
  pumping: boolean;
  again: boolean;
  /** No pending line was found last time: claims wait for a wake-up that says there may be some. */
  idle: boolean;
  /** The deployment's in_progress batches, oldest first, as last read. */
  batches: Batch[];
  batchesReadAt: number;
  /** Batches whose key's day budget could not hold their next line, until this time. */
  readonly waitingForBudget: Map<string, number>;
  /** Batches whose last claim found no pending line: once none of their lines runs here, they may be done. */
  readonly drained: Set<string>;
}

interface RunningLine {
  readonly line: ClaimedLine;
  readonly lane: Lane;
  readonly batch: Batch;
  readonly jobs: Set<Job>;
  /** Jobs sent so far (an embeddings line larger than the model's batch sends several, one after the other). */
  sent: number;
  /** The batch stopped taking lines while this one ran: how it ends if its job is canceled for that. */
  stoppedBy: BatchLineErrorCode | null;
  /** The LoRA adapter the line's `model` names, once read; null: the base model. */
  adapter: AddressedAdapter | null;
}

const JOB_KINDS: Record<BatchEndpoint, JobKind> = {
  '/v1/chat/completions': 'JOB_KIND_CHAT_COMPLETION', '/v1/completions': 'JOB_KIND_COMPLETION', '/v1/embeddings': 'JOB_KIND_EMBEDDING',
  // A Responses line runs as the chat it translates to (control-plane/openai/batch-lines.ts).
  '/v1/responses': 'JOB_KIND_CHAT_COMPLETION',
};
const KEY_CACHE_MS = 5_000;
const ANSWER_RETRY_MS = 200;
const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };

/**
 * Runs batches on every server, from the database: runs their lines on this server's replicas
 * (validating new batches and finalizing ended ones is batch-upkeep.ts's; writing what a line
 * got, batch-line-results.ts's). Lines take only capacity live traffic
 * leaves free (docs/batches.md):
 *
 * - a line starts only in a slot that is idle now (a reserved free slot of a replica whose
 *   agent this server holds: never queued at an agent, never relayed, never counted as
 *   demand by the autoscaler), and none starts while a live request waits;
 * - per deployment, a window (batch-window.ts, additive increase / multiplicative decrease on
 *   the live traffic's queueing) bounds the lines in flight, so a live request arriving meets
 *   at most one line per busy slot ahead of it;
 * - a line's claim is leased (renewed by the sweep); a server that dies leaves leases that
 *   lapse and any server re-queues its lines; a lost job (its agent crashed) is re-queued
 *   too; a line runs at most twice, and its answer is written only while its claim holds;
 * - a line counts toward its key's tokens per day with a hold of its worst case taken only
 *   when the day's budget can hold it whole: otherwise it waits (pending) and the batch
 *   moves on to others, so a batch never pushes the key past its limit.
 *
 * Woken, not polling, where it can be: a batch changing (here or on a peer, through NOTIFY), a
 * slot freeing up on a replica; the poll and the sweep are the safety nets.
 */
export class BatchRunner {
  private readonly lanes = new Map<string, Lane>();
  private readonly running = new Map<string, RunningLine>();
  private readonly progressTimers = new Map<string, NodeJS.Timeout>();
  private readonly keyCache = new Map<string, { key: BatchKey | null; expiresAt: number }>();
  private pollTimer: NodeJS.Timeout | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private polling: Promise<void> | null = null;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];
  private readonly owner: string;
  private readonly upkeep: BatchUpkeep;
  private readonly results: BatchLineResults;
  private readonly now: () => number;

  constructor(private readonly parts: BatchRunnerParts, private readonly options: BatchRunnerOptions, private readonly logger: Logger) {
    this.now = parts.now ?? Date.now;
    this.owner = parts.notifier.instanceId;
    this.upkeep = new BatchUpkeep(parts, this.owner, options.lineLeaseMs, logger);
    this.results = new BatchLineResults(parts, this.owner, logger);
  }

  start(): void {
    this.parts.events.on('batchUpdated', this.onBatch);
    this.parts.dispatcher.onCapacity((deploymentId) => {
      const lane = this.lanes.get(deploymentId);
      if (lane && !lane.idle) this.pump(lane);
    });
    // Notifications missed while the listening connection was down: look now, not at the next poll.
    this.parts.notifier.onReset(() => void this.poll());
    this.pollTimer = setInterval(() => void this.poll(), this.options.pollIntervalMs);
    this.pollTimer.unref();
    this.sweepTimer = setInterval(() => void this.upkeep.sweep(), this.options.sweepIntervalMs);
    this.sweepTimer.unref();
    // Three renewals per lease: one missed (a slow database) does not lose the lines.
    this.renewTimer = setInterval(() => void this.renew(), Math.max(10, Math.floor(this.options.lineLeaseMs / 3)));
    this.renewTimer.unref();
    void this.poll();
    void this.upkeep.sweep();
  }

  /** Starts nothing more (shutdown, before agents drain: their lines finish, the rest stays pending for the next server). */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.parts.events.off('batchUpdated', this.onBatch);
    clearInterval(this.pollTimer);
    clearInterval(this.sweepTimer);
    await Promise.all([this.polling, this.upkeep.stop()]);
  }

  /** Stops, then waits (at most `timeoutMs`) for the lines running here to write their answers. */
  async settle(timeoutMs = 10_000): Promise<void> {
    await this.stop();
    if (this.running.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
    }
    clearInterval(this.renewTimer);
    for (const timer of this.progressTimers.values()) clearTimeout(timer);
    this.progressTimers.clear();
  }

  /** Lines of batches running on this server's replicas now (tests, telemetry). */
  get linesInFlight(): number {
    return this.running.size;
  }

  private readonly onBatch = (batch: Batch): void => {
    if (this.stopped) return;
    switch (batch.status) {
      case 'validating':
        void this.upkeep.validateDue();
        return;
      case 'in_progress': {
        const lane = this.lane(batch.deploymentId);
        lane.idle = false;
        if (!lane.batches.some((known) => known.id === batch.id)) lane.batchesReadAt = 0;
        this.pump(lane);
        return;
      }
      case 'finalizing':
      case 'cancelling':
        this.stopLines(batch);
        if (!this.runsLinesOf(batch.id)) void this.upkeep.finalizeDue();
        return;
      default:
    }
  };

  // ---- loops ----------------------------------------------------------------------------

  /** Deployments with lines waiting are pumped; lines of batches that stopped are stopped; new batches validated. */
  private poll(): Promise<void> {
    if (this.polling || this.stopped) return this.polling ?? Promise.resolve();
    this.polling = (async () => {
      try {
        for (const deploymentId of await this.parts.store.deploymentsWithPendingLines()) {
          const lane = this.lane(deploymentId);
          lane.idle = false;
          lane.batchesReadAt = 0;
          this.pump(lane);
        }
        const statuses = await this.parts.store.statuses([...new Set([...this.running.values()].map((running) => running.batch.id))]);
        for (const running of this.running.values()) {
          const status = statuses.get(running.batch.id);
          if (status !== 'in_progress' && !running.stoppedBy) this.stopLine(running, status === 'cancelling' || status === 'cancelled' ? 'batch_cancelled' : 'batch_expired');
        }
        await this.upkeep.validateDue();
      } catch (error) {
        this.logger.error({ err: error }, 'batch poll failed');
      } finally {
        this.polling = null;
      }
    })();
    return this.polling;
  }

  /** Keeps the claims of this server's running lines (and of the batch it validates or finalizes); also while stopping, until they end. */
  private renewing = false;

  private async renew(): Promise<void> {
    if (this.renewing) return;
    this.renewing = true;
    try {
      await this.parts.store.renewLeases(this.owner, this.options.lineLeaseMs, [...this.running.values()].map((running) => running.line));
    } catch (error) {
      this.logger.warn({ err: error }, 'could not renew batch leases');
    } finally {
      this.renewing = false;
    }
  }

  // ---- lines ----------------------------------------------------------------------------

  private lane(deploymentId: string): Lane {
    let lane = this.lanes.get(deploymentId);
    if (!lane) {
      lane = {
        deploymentId, window: null, running: new Set(), pumping: false, again: false, idle: false, batches: [], batchesReadAt: 0,
        waitingForBudget: new Map(), drained: new Set(),
      };
      this.lanes.set(deploymentId, lane);
    }
    return lane;
  }

  private pump(lane: Lane): void {
    if (this.stopped) return;
    if (lane.pumping) {
      lane.again = true;
      return;
    }
    lane.pumping = true;
    lane.again = false;
    this.fill(lane)
      .catch((error) => this.logger.error({ err: withoutContent(error), deploymentId: lane.deploymentId }, 'starting batch lines failed'))
      .finally(() => {
        lane.pumping = false;
        if (lane.again) this.pump(lane);
      });
  }

  /** Starts lines while the window and the replicas' free slots allow and no live request waits. */
  private async fill(lane: Lane): Promise<void> {
    while (!this.stopped && !lane.idle) {
      const connections = this.connectionsOf(lane.deploymentId);
      if (connections.length === 0) return;
      lane.window ??= new BatchWindow(connections.length);
      if (connections.some(liveWaiting)) {
        if (connections.some(linesInTheWay)) lane.window.congested(lane.running.size);
        return;
      }
      const room = lane.window.limit - lane.running.size;
      if (room <= 0) return;
      const holds: SlotHold[] = [];
      for (let connection = mostFree(connections); connection && holds.length < room; connection = mostFree(connections)) {
        holds.push(connection.reserveSlot());
      }
      if (holds.length === 0) return;
      let claimed: Array<{ batch: Batch; line: ClaimedLine }>;
      try {
        claimed = await this.claim(lane, holds.length);
      } catch (error) {
        for (const hold of holds) hold.release();
        throw error;
      }
      // Given back without a capacity wake-up: nobody was waiting for these slots but us.
      for (const hold of holds.slice(claimed.length)) hold.release();
      if (claimed.length === 0) {
        lane.idle = true;
        return;
      }
      // Never more lines than slots held (a claim that returned more gives the rest back).
      for (const { line } of claimed.slice(holds.length)) await this.parts.store.releaseLine(line, this.owner);
      claimed.slice(0, holds.length).forEach(({ batch, line }, index) => void this.run(lane, batch, line, holds[index]));
    }
  }

  /** Up to `count` pending lines of the deployment's batches, oldest batch first. */
  private async claim(lane: Lane, count: number): Promise<Array<{ batch: Batch; line: ClaimedLine }>> {
    const now = this.now();
    if (now - lane.batchesReadAt > this.options.pollIntervalMs) {
      lane.batches = await this.parts.store.openBatches(lane.deploymentId);
      lane.batchesReadAt = now;
    }
    const claimed: Array<{ batch: Batch; line: ClaimedLine }> = [];
    for (const batch of lane.batches) {
      if ((lane.waitingForBudget.get(batch.id) ?? 0) > now) continue;
      const wanted = count - claimed.length;
      const lines = await this.parts.store.claimLines(batch.id, this.owner, this.options.lineLeaseMs, wanted);
      if (lines.length < wanted) lane.drained.add(batch.id);
      for (const line of lines) claimed.push({ batch, line });
      if (claimed.length >= count) break;
    }
    return claimed;
  }

  /** One line, from its claim to its answer written (or its claim given back). */
  private async run(lane: Lane, batch: Batch, line: ClaimedLine, slot: SlotHold): Promise<void> {
    const running: RunningLine = { line, lane, batch, jobs: new Set(), sent: 0, stoppedBy: null, adapter: null };
    const id = `${line.batchId}:${line.lineIndex}`;
    lane.running.add(running);
    this.running.set(id, running);
    const startedAt = this.now();
    let tokenHold: TokenHold | null = null;
    let ticket: WorkTicket | null = null;
    let ran = false;
    const span = this.parts.tracing && batch.traceparent ? lineSpan(this.parts.tracing, batch, line) : null;
    try {
      const model = this.parts.catalog.find(batch.model);
      if (!model) {
        await this.answer(running, { kind: 'answered', response: this.parts.lines.render(new AppError('model_not_found', `model '${batch.model}' is no longer in the catalog`)), usage: NO_USAGE });
        return;
      }
      if (slot.connection.closed || slot.connection.draining) {
        await this.parts.store.releaseLine(line, this.owner);
        return;
      }
      const input = await readLineInput(this.parts.inputs, this.parts.lines, batch, model, line);
      if (input.kind !== 'ready') {
        if (input.kind === 'unavailable') await this.results.fail(line, 'input_unavailable');
        else await this.answer(running, { kind: 'answered', response: input.response, usage: NO_USAGE });
        return;
      }
      const { body, holdTokens } = input;
      if (input.otherModel !== undefined) {
        // Resolved when it runs, as a live request is: an adapter detached since validation answers as any other model.
        running.adapter = await this.parts.adapters?.onDeployment(batch.workspaceId, { id: batch.deploymentId }, input.otherModel, this.now() + this.options.lineTimeoutMs) ?? null;
        if (!running.adapter) {
          await this.answer(running, { kind: 'answered', response: this.parts.lines.render(modelMismatch(batch.model, input.otherModel)), usage: NO_USAGE });
          return;
        }
      }
      const key = await this.keyOf(batch.apiKeyId);
      if (key) {
        if (holdTokens > key.tpdLimit) {
          const refusal = new AppError('rate_limit_error', `this request may use up to ${holdTokens} tokens, more than the key's whole tokens-per-day limit of ${key.tpdLimit}; lower max_tokens or raise the limit`);
          await this.answer(running, { kind: 'answered', response: this.parts.lines.render(refusal), usage: NO_USAGE });
          return;
        }
        tokenHold = await this.parts.rateLimiter.holdWithin(key, holdTokens);
        if (!tokenHold) {
          // Not a failure: the line waits for the key's budget (the next UTC day, or tokens given back).
          lane.waitingForBudget.set(batch.id, this.now() + this.options.tpdRetryMs);
          await this.parts.store.releaseLine(line, this.owner);
          return;
        }
      }
      ran = true;
      const adapter = running.adapter?.adapter;
      ticket = this.parts.tickets.batchLine({ ...batch, batchId: batch.id, endpoint: USAGE_ENDPOINTS[batch.endpoint], ...(adapter ? { adapter } : {}) }, tokenHold, startedAt,
        (listener, part, traceparent) => this.send(running, slot, model, part!, listener, traceparent),
        span ? { traceId: span.spanContext().traceId, parent: span.spanContext() } : undefined);
      tokenHold = null;
      const lineTicket = ticket;
      const outcome = await this.parts.lines.run(batch.endpoint, model, body, (part, listener) => lineTicket.dispatch(listener, part), adapter?.name);
      span?.setAttribute(ATTR.outcome, outcome.kind === 'answered' ? String(outcome.response.statusCode) : outcome.failure.code);
      settleLine(ticket, outcome);
      // One retry: a database blip should not cost the line a run.
      await this.answer(running, outcome).catch(async () => {
        await new Promise((resolve) => setTimeout(resolve, ANSWER_RETRY_MS));
        await this.answer(running, outcome);
      });
    } catch (error) {
      // Put back (at most twice in all); if even that fails, the line's lease lapses once this
      // server stops renewing it (it renews only lines it runs) and any server's sweep recovers it.
      this.logger.error({ err: withoutContent(error), batchId: line.batchId, line: line.lineIndex }, 'a batch line failed unexpectedly; it runs again (at most twice in all)');
      await this.parts.store.lineLost(line, this.owner).catch(() => undefined);
    } finally {
      span?.end();
      slot.release();
      if (tokenHold) this.parts.rateLimiter.settle(tokenHold, 0);
      // A line that failed unexpectedly after its ticket was made gives its hold back (a settled ticket ignores this).
      ticket?.release();
      lane.running.delete(running);
      this.running.delete(id);
      if (ran && lane.window) {
        const connections = this.connectionsOf(lane.deploymentId);
        lane.window.finished(connections.some(linesKeptLiveWaiting), lane.running.size, connections.reduce((sum, connection) => sum + connection.maxConcurrency, 0));
      }
      this.lineEnded(running);
    }
  }

  /** Sends one job of a running line: on its reserved slot first; later parts on a free slot (or the same replica). */
  private send(running: RunningLine, slot: SlotHold, model: CatalogModel, body: Buffer, listener: JobListener, traceparent: string | undefined): Job {
    const { batch, adapter } = running;
    const request: DispatchRequest = {
      // An adapter's job carries its ref and the client's name for it, which the agent puts back in the answer's `model`.
      deploymentId: batch.deploymentId, kind: JOB_KINDS[batch.endpoint], body, stream: false, includeUsage: false,
      model: adapter ? adapter.adapter.name : batch.model, ...(adapter ? { adapter: adapter.ref } : {}),
      deadlineUnixMs: this.now() + this.options.lineTimeoutMs, batch: true,
      ...(model.embedding ? { embedding: { dimensions: model.embedding.dimensions, maxInputTokens: model.embedding.maxInputTokens } } : {}),
      ...(batch.endpoint === '/v1/embeddings' ? {} : { cacheSalt: this.parts.cacheSalts.of(batch.workspaceId) }),
      ...(traceparent ? { traceparent } : {}),
    };
    // Chosen once the request is built: a line addressed to an adapter runs only where there are adapter slots.
    const connection = lineReplica(slot.connection, running.sent === 0, () => this.connectionsOf(running.lane.deploymentId), request.adapter !== undefined);
    if (!connection) {
      throw new AppError('no_replica_available', request.adapter ? 'no replica of this deployment with adapter slots is ready for the line' : 'no replica of this deployment is ready for the line');
    }
    const jobs = running.jobs;
    let job: Job | undefined;
    const tracked: JobListener = {
      onChunk: (data) => listener.onChunk(data),
      onOutput: (data, contentType, objectKey) => listener.onOutput(data, contentType, objectKey),
      onCompleted: (usage, finishReason) => {
        if (job) jobs.delete(job);
        listener.onCompleted(usage, finishReason);
      },
      onFailed: (failure) => {
        if (job) jobs.delete(job);
        listener.onFailed(failure);
      },
    };
    job = this.parts.dispatcher.dispatchTo(connection, request, tracked);
    running.sent++;
    // The job is on the agent now (counted in its in-flight jobs): the reservation has done its work.
    slot.release();
    if (!job.finished) jobs.add(job);
    if (running.stoppedBy) job.cancel(running.stoppedBy);
    return job;
  }

  /** Writes what the line got (batch-line-results.ts); a line put back makes its lane look for lines again. */
  private async answer(running: RunningLine, outcome: LineRun): Promise<void> {
    if (await this.results.write(running.line, outcome, running.stoppedBy)) {
      running.lane.idle = false;
      running.lane.drained.delete(running.line.batchId);
    }
  }

  /** After a line: progress announced (throttled), the batch perhaps done or finalizable, more lines started. */
  private lineEnded(running: RunningLine): void {
    const { lane, batch } = running;
    this.announceProgress(batch.id);
    const others = this.runsLinesOf(batch.id);
    if (running.stoppedBy) {
      if (!others) void this.upkeep.finalizeDue();
    } else if (lane.drained.has(batch.id) && !others) {
      this.parts.store.finishIfDone(batch.id).then((done) => {
        if (done) {
          lane.drained.delete(batch.id);
          lane.batchesReadAt = 0;
          void this.upkeep.finalizeDue();
        }
      }, (error) => this.logger.warn({ err: error, batchId: batch.id }, 'could not check whether a batch is done'));
    }
    if (this.running.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
    this.pump(lane);
  }

  /** The batch stopped taking lines: its lines running here are canceled (a job that answers anyway keeps its answer). */
  private stopLines(batch: Batch): void {
    const code: BatchLineErrorCode = batch.status === 'cancelling' || batch.endStatus === 'cancelled' ? 'batch_cancelled' : 'batch_expired';
    for (const running of this.running.values()) if (running.batch.id === batch.id && !running.stoppedBy) this.stopLine(running, code);
    const lane = this.lanes.get(batch.deploymentId);
    if (lane) lane.batches = lane.batches.filter((known) => known.id !== batch.id);
  }

  private stopLine(running: RunningLine, code: BatchLineErrorCode): void {
    running.stoppedBy = code;
    for (const job of running.jobs) job.cancel(code);
  }

  private runsLinesOf(batchId: string): boolean {
    for (const running of this.running.values()) if (running.batch.id === batchId) return true;
    return false;
  }

  private announceProgress(batchId: string): void {
    if (this.progressTimers.has(batchId)) return;
    const timer = setTimeout(() => {
      this.progressTimers.delete(batchId);
      this.parts.store.announce(batchId).catch((error) => this.logger.warn({ err: error, batchId }, 'could not announce batch progress'));
    }, this.options.progressIntervalMs);
    timer.unref();
    this.progressTimers.set(batchId, timer);
  }

  private connectionsOf(deploymentId: string): AgentConnection[] {
    return this.parts.dispatcher.connections(deploymentId).filter(takesWork);
  }

  private async keyOf(apiKeyId: string): Promise<BatchKey | null> {
    const now = this.now();
    const cached = this.keyCache.get(apiKeyId);
    if (cached && cached.expiresAt > now) return cached.key;
    const key = await this.parts.keys(apiKeyId);
    this.keyCache.set(apiKeyId, { key, expiresAt: now + KEY_CACHE_MS });
    return key;
  }
}

/** What a live request naming a model that is not the deployment's (nor an adapter attached to it) gets. */
function modelMismatch(deploymentModel: string, named: string): AppError {
  try {
    checkModelField({ modelId: deploymentModel }, named);
  } catch (error) {
    return error as AppError;
  }
  return new AppError('model_mismatch', `model '${named}' is not served here`, { param: 'model' });
}

/**
 * A traced batch's line: a trace of its own (a batch may hold 50,000 lines and run for a day,
 * too many and too long for one trace), linked to the batch's create request, which the
 * batch's webhook continues.
 */
function lineSpan(tracing: Tracing, batch: Batch, line: ClaimedLine): Span {
  const created = parentOf(batch.traceparent);
  return tracing.startSpan('batch line', SpanKind.CONSUMER, undefined, {
    [ATTR.batchId]: batch.id, 'inference.batch.line': line.lineIndex, [ATTR.deploymentId]: batch.deploymentId, [ATTR.workspaceId]: batch.workspaceId,
  }, undefined, created ? [{ context: created }] : undefined);
}
