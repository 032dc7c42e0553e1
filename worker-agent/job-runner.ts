/**
 * Runs assigned jobs against the engine: at most `maxConcurrency` engine calls at once, the
 * rest in a local FIFO queue (`accepted{queued: true}`), and exactly one terminal event per
 * job whichever comes first: the engine's answer, Cancel, the deadline, or the drain timeout.
 * With priority scheduling (a shared replica) guest jobs wait in a second FIFO that is served
 * only when no owner job waits. Batch lines (`Assign.batch`) are sent only into idle slots and
 * should never wait; one that does waits in a third FIFO, served only when nothing else waits.
 * A live job that finds every slot taken while batch lines hold some takes the slot of the
 * line started last, on engines that can set a line aside (`Engine.batchPreemption`): the line
 * is parked (paused, or left to the engine's priority order) and takes the next slot that frees
 * before any waiting line; elsewhere the live job waits, behind at most one line per slot.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Assign, JobEvent, JobFailureCode } from '../proto/worker/v1/index';
import type { AgentLogger } from './agent-logger';
import type { Engine, EngineSink } from './engines/engine';
import { EngineFailure, withUsage } from './engines/engine-failure';
import type { EventWriter } from './event-writer';
import { JobCancellation } from './job-cancellation';
import { JobPreemption } from './job-preemption';
import { acceptedEvent, completedEvent, failedEvent, failedEventOf } from './job-events';
import { isMediaJob, runMediaJob } from './media-job-runner';
import { StreamWindow } from './stream-window';
import { isSampled, parentOf, SpanKind, traceparentOf, type Span, type SpanContext, type Tracing } from '../common/tracing/tracing';
import { ATTR, GEN_AI_OPERATIONS } from '../common/tracing/span-attributes';
import { endJobSpan } from '../common/tracing/job-span';

interface TrackedJob {
  readonly assign: Assign;
  /** The stream the job arrived on; its events can only go back there. */
  readonly writer: EventWriter;
  readonly cancellation: JobCancellation;
  /** Streamed jobs with `stream_window_bytes`: how far the job may run ahead of its client. */
  readonly window: StreamWindow | null;
  /** Batch lines on an engine that suspends them: how the runner pauses and resumes the line. */
  preemption: JobPreemption | null;
  /** The engine call has started (and, unless parked, holds a slot). */
  running: boolean;
  /** A running batch line set aside for a live job: it holds no slot until resumed. */
  parked: boolean;
  finished: boolean;
  /** It waited in the local queue: its start is reported (`accepted{queued: false}`). */
  waited: boolean;
  /** The job's span, when tracing is on and the Assign carried a traceparent; null otherwise. */
  readonly span: Span | null;
  deadlineTimer?: NodeJS.Timeout;
  abortTimer?: NodeJS.Timeout;
}

/**
 * After a cancel or deadline the engine call rejects at once with the usage it produced, so
 * the terminal event can carry it; an engine that ignores the abort is not waited for longer.
 */
const ABORT_GRACE_MS = 1_000;
const EMPTY_USAGE = Object.freeze({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });
/** What an engine still waiting for credit after its job ended unwinds with (nobody reads its answer). */
const FINISHED = new EngineFailure('canceled', 'the job already ended');
/** Media jobs are billed by GPU time, not tokens. */
const MEDIA_RESULT = Object.freeze({ usage: EMPTY_USAGE, finishReason: 'stop', usageEstimated: false });
/** How a job whose stream dropped ends in its span (no terminal event can be sent). */
const ABANDONED = { code: 'canceled', message: 'the stream to the control plane dropped' };
/** The engine API operation of each job kind, for span names and `gen_ai.operation.name`. */
const OPERATIONS: Record<string, string> = {
  JOB_KIND_CHAT_COMPLETION: GEN_AI_OPERATIONS['chat.completions'], JOB_KIND_COMPLETION: GEN_AI_OPERATIONS.completions, JOB_KIND_EMBEDDING: GEN_AI_OPERATIONS.embeddings,
  JOB_KIND_IMAGE_GENERATION: 'image_generation', JOB_KIND_IMAGE_EDIT: 'image_edit', JOB_KIND_VIDEO_GENERATION: 'video_generation',
};

export class JobRunner {
  private readonly jobs = new Map<string, TrackedJob>();
  /** Owner jobs waiting for a slot; without priority scheduling, every waiting job. */
  private readonly waiting: TrackedJob[] = [];
  /** Guest jobs waiting for a slot: started only when `waiting` is empty. */
  private readonly guestsWaiting: TrackedJob[] = [];
  /** Batch lines waiting for a slot: started only when no owner or guest job waits. */
  private readonly batchWaiting: TrackedJob[] = [];
  /** Running batch lines holding a slot, in the order they took it (the last is preempted first). */
  private readonly slotLines: TrackedJob[] = [];
  /** Batch lines set aside for live jobs, resumed first-parked first before any waiting line starts. */
  private readonly parked: TrackedJob[] = [];
  private prioritised = false;
  /** The replica this agent is (from its Welcome), named on its jobs' spans. */
  private replicaId = '';
  private running = 0;
  private draining = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    private readonly engine: Engine,
    private readonly maxConcurrency: number,
    private readonly logger: AgentLogger,
    private readonly now: () => number = Date.now,
    /** The agent's tracing (OTEL_*, read by the agent itself); null when off: no job makes a span. */
    private readonly tracing: Tracing | null = null,
  ) {}

  /** Engine calls running now. */
  get inFlight(): number {
    return this.running;
  }

  /** Batch lines set aside for live jobs now (not in `inFlight` or `queued`). */
  get parkedLines(): number {
    return this.parked.length;
  }

  /** Accepted jobs waiting for a concurrency slot, owners', guests' and batch lines together. */
  get queued(): number {
    return this.waiting.length + this.guestsWaiting.length + this.batchWaiting.length;
  }

  /**
   * Set from each Welcome: guests are accepted, and wait behind every owner job. Jobs of an
   * earlier stream were abandoned when it dropped, so a change never strands a queued guest.
   */
  setPriorityScheduling(enabled: boolean): void {
    this.prioritised = enabled;
  }

  /** Set from each Welcome: the replica its jobs' spans name. */
  setReplica(replicaId: string): void {
    this.replicaId = replicaId;
  }

  assign(assign: Assign, writer: EventWriter): void {
    // A repeated Assign for a job this agent already owns changes nothing.
    if (this.jobs.has(assign.jobId)) return;
    if (this.draining) {
      writer.send(failedEvent(assign.jobId, 'agent_draining', 'agent is draining and takes no new jobs'));
      return;
    }
    if (assign.guest && !this.prioritised) {
      writer.send(failedEvent(assign.jobId, 'invalid_job', 'this replica does not serve guests'));
      return;
    }
    const window = assign.stream && assign.streamWindowBytes ? new StreamWindow(assign.streamWindowBytes) : null;
    const preemption = assign.batch && this.engine.batchPreemption === 'suspend' ? new JobPreemption() : null;
    const parent = this.tracing ? parentOf(assign.traceparent) : undefined;
    // An unsampled trace's context goes on to the engine as it came; no span is made for it.
    const span = parent && isSampled(parent) ? this.jobSpan(this.tracing!, assign, parent) : null;
    const job: TrackedJob = { assign, writer, cancellation: new JobCancellation(), window, preemption, running: false, parked: false, finished: false, waited: false, span };
    const remainingMs = assign.deadlineUnixMs > 0 ? assign.deadlineUnixMs - this.now() : Infinity;
    if (remainingMs <= 0) {
      const failed = failedEvent(assign.jobId, 'deadline_exceeded', 'job deadline passed before the agent received it');
      writer.send(failed);
      if (span) endJobSpan(span, null, failed.failed!);
      return;
    }
    this.jobs.set(assign.jobId, job);
    if (Number.isFinite(remainingMs)) {
      job.deadlineTimer = setTimeout(() => this.abort(job, 'deadline_exceeded', 'job deadline passed'), remainingMs);
    }
    // `accepted` is only worth a frame when the job has to wait; otherwise its output follows.
    if (this.running >= this.maxConcurrency && (assign.batch || !this.parkLine())) {
      writer.send(acceptedEvent(assign.jobId, true));
      job.waited = true;
      this.queueOf(assign).push(job);
    } else {
      this.start(job);
    }
  }

  /** Unknown ids are ignored: the job may have just finished. */
  cancel(jobId: string, reason: string): void {
    const job = this.jobs.get(jobId);
    if (job) this.abort(job, 'canceled', `canceled by the control plane: ${reason || 'no reason given'}`);
  }

  /** The job's client consumed `bytes` more of its chunks. Unknown ids are ignored (it may have just finished). */
  credit(jobId: string, bytes: number): void {
    this.jobs.get(jobId)?.window?.credit(bytes);
  }

  /** The stream these jobs came on dropped: nobody can receive their results, so stop them silently. */
  abandon(writer: EventWriter): void {
    for (const job of [...this.jobs.values()]) {
      if (job.writer !== writer) continue;
      const reason = new EngineFailure('canceled', 'the stream to the control plane dropped');
      job.cancellation.abort(reason);
      job.window?.close(reason);
      this.finish(job, undefined);
    }
  }

  /** Stops taking jobs, lets running and queued ones finish, and fails what is left after `timeoutMs`. */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    if (this.jobs.size === 0) return;
    const timeout = new AbortController();
    const idle = new Promise<void>((resolve) => this.idleWaiters.push(resolve));
    const timedOut = await Promise.race([
      idle.then(() => false),
      sleep(timeoutMs, true, { signal: timeout.signal }).catch(() => false),
    ]);
    timeout.abort();
    if (!timedOut) return;
    for (const job of [...this.jobs.values()]) this.abort(job, 'agent_draining', `job still running after the ${timeoutMs} ms drain timeout`);
    // Aborted jobs report (with their usage) within ABORT_GRACE_MS; the stream must stay open until then.
    await idle;
  }

  private abort(job: TrackedJob, code: JobFailureCode, message: string): void {
    if (job.finished || job.cancellation.aborted) return;
    if (!job.running) {
      this.finish(job, failedEvent(job.assign.jobId, code, message));
      return;
    }
    const reason = new EngineFailure(code, message);
    job.cancellation.abort(reason);
    // An engine waiting for its client's credit is not reading anything that could notice the abort.
    job.window?.close(reason);
    job.abortTimer = setTimeout(() => this.finish(job, failedEvent(job.assign.jobId, code, message)), ABORT_GRACE_MS);
  }

  /** Starts a job's engine call, under the job's span when it has one (so its log lines name it). */
  private start(job: TrackedJob): void {
    if (job.span) void this.tracing!.runIn(job.span, () => this.run(job));
    else void this.run(job);
  }

  private async run(job: TrackedJob): Promise<void> {
    job.running = true;
    this.running += 1;
    if (job.assign.batch) this.slotLines.push(job);
    const { jobId } = job.assign;
    // A job that waited says it started (the control plane times its wait in this queue by it); one that did not, needs no frame.
    if (job.waited) job.writer.send(acceptedEvent(jobId, false));
    const engineSpan = job.span ? this.engineSpan(this.tracing!, job.span, job.assign) : null;
    const sink: EngineSink = {
      chunk: (data) => {
        if (job.finished || job.cancellation.aborted) return undefined;
        const saturated = job.writer.send({ jobId, chunk: { data } });
        const windowFull = job.window?.sent(data.length);
        if (!windowFull) return saturated;
        return saturated ? Promise.all([saturated, windowFull]).then(() => undefined) : windowFull;
      },
      output: (data, contentType) => (job.finished || job.cancellation.aborted ? undefined : job.writer.send({ jobId, output: { data, contentType, objectKey: '' } })),
    };
    try {
      if (isMediaJob(job.assign)) {
        await runMediaJob(this.engine, job.assign, { send: (event) => (job.finished ? undefined : job.writer.send(event)) }, job.cancellation);
        engineSpan?.end();
        this.finish(job, completedEvent(jobId, MEDIA_RESULT));
        return;
      }
      // The engine's request carries the engine-call span's context: an engine that traces (vLLM) puts its spans under it.
      const engineJob = engineSpan ? { ...job.assign, traceparent: traceparentOf(engineSpan) } : job.assign;
      const result = await this.engine.run(engineJob, sink, job.cancellation, job.preemption ?? undefined);
      if (engineSpan) {
        if (result.responseId) engineSpan.setAttribute(ATTR.responseId, result.responseId);
        endJobSpan(engineSpan, result, null);
      }
      this.finish(job, completedEvent(jobId, result));
    } catch (error) {
      if (engineSpan) endJobSpan(engineSpan, null, { code: (error as EngineFailure)?.code ?? 'engine_error', message: (error as Error)?.message ?? String(error), usage: (error as EngineFailure)?.usage });
      // A job already answered (canceled, deadline, drain, stream lost) unwinds here quietly.
      if (job.finished) return;
      // Aborted: report why we aborted (engines may surface it as a generic AbortError),
      // with whatever usage the engine counted before it stopped.
      const reason = job.cancellation.reason;
      if (reason instanceof EngineFailure) {
        this.finish(job, failedEventOf(jobId, withUsage(reason, (error as EngineFailure).usage ?? EMPTY_USAGE)));
        return;
      }
      if (!(error instanceof EngineFailure)) this.logUnexpected(job, error);
      this.finish(job, failedEventOf(jobId, error));
    }
  }

  /** The agent's span of a job, the child of the span that sent it (a server's dispatch or relay span). */
  private jobSpan(tracing: Tracing, assign: Assign, parent: SpanContext): Span {
    const attributes: Record<string, string | boolean> = {
      [ATTR.jobId]: assign.jobId, [ATTR.requestModel]: assign.model, [ATTR.operationName]: OPERATIONS[assign.kind] ?? assign.kind,
      [ATTR.engineKind]: this.engine.kind,
    };
    if (this.replicaId) attributes[ATTR.replicaId] = this.replicaId;
    if (assign.batch) attributes['inference.batch_line'] = true;
    if (assign.guest) attributes['inference.guest'] = true;
    return tracing.startSpan('agent job', SpanKind.SERVER, parent, attributes);
  }

  /** The engine call's span: an HTTP client span for an engine at a URL (its context goes in the `traceparent` header), internal for an in-process one. */
  private engineSpan(tracing: Tracing, parent: Span, assign: Assign): Span {
    const operation = OPERATIONS[assign.kind] ?? assign.kind;
    const attributes: Record<string, string> = { [ATTR.operationName]: operation, [ATTR.requestModel]: assign.model, [ATTR.engineKind]: this.engine.kind };
    if (this.engine.url) attributes[ATTR.serverAddress] = this.engine.url;
    return tracing.startSpan(`engine ${operation}`, this.engine.url ? SpanKind.CLIENT : SpanKind.INTERNAL, parent.spanContext(), attributes);
  }

  /**
   * An error's message may quote the body (V8's JSON.parse errors quote the input) and its
   * cause may hold an engine body: a guest's stays out of the log, only its name is kept.
   */
  private logUnexpected(job: TrackedJob, error: unknown): void {
    const { jobId } = job.assign;
    if (!job.assign.guest) {
      this.logger.warn({ jobId, err: error }, 'engine call failed unexpectedly');
      return;
    }
    const errorName = error instanceof Error ? error.name : typeof error;
    this.logger.warn({ jobId, guest: true, errorName }, 'engine call failed unexpectedly (a guest job: details withheld)');
  }

  /** The FIFO a job waits in: owners', guests' or batch lines'. */
  private queueOf(assign: Assign): TrackedJob[] {
    if (assign.guest) return this.guestsWaiting;
    return assign.batch ? this.batchWaiting : this.waiting;
  }

  private removeFromQueue(job: TrackedJob): void {
    remove(this.queueOf(job.assign), job);
  }

  /**
   * Sets the batch line that took its slot last aside, so a live job can have the slot now;
   * false when the engine cannot (the live job waits) or no line holds a slot.
   */
  private parkLine(): boolean {
    if (!this.engine.batchPreemption) return false;
    const line = this.slotLines.pop();
    if (!line) return false;
    this.running -= 1;
    line.parked = true;
    line.preemption?.pause();
    this.parked.push(line);
    return true;
  }

  /**
   * Fills a free slot: the oldest waiting owner job, else the oldest waiting guest job, else
   * the line parked first (resumed), else the oldest waiting batch line. False when none is left.
   */
  private startNext(): boolean {
    const live = this.waiting.length > 0 ? this.waiting.shift() : this.guestsWaiting.shift();
    if (live) {
      this.start(live);
      return true;
    }
    const parked = this.parked.shift();
    if (parked) {
      parked.parked = false;
      this.running += 1;
      this.slotLines.push(parked);
      parked.preemption?.resume();
      return true;
    }
    const line = this.batchWaiting.shift();
    if (line) this.start(line);
    return line !== undefined;
  }

  private finish(job: TrackedJob, terminal: JobEvent | undefined): void {
    if (job.finished) return;
    job.finished = true;
    clearTimeout(job.deadlineTimer);
    clearTimeout(job.abortTimer);
    this.jobs.delete(job.assign.jobId);
    job.window?.close(FINISHED);
    if (job.parked) remove(this.parked, job);
    else if (job.running) {
      this.running -= 1;
      if (job.assign.batch) remove(this.slotLines, job);
    } else this.removeFromQueue(job);
    if (terminal) job.writer.send(terminal);
    if (job.span) endJobSpan(job.span, terminal?.completed ?? null, terminal ? terminal.failed ?? null : ABANDONED);
    while (this.running < this.maxConcurrency && this.startNext());
    if (this.jobs.size === 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const resolve of waiters) resolve();
    }
  }
}

function remove(jobs: TrackedJob[], job: TrackedJob): void {
  const position = jobs.indexOf(job);
  if (position !== -1) jobs.splice(position, 1);
}
