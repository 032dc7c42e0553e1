import type { ClientPresence } from '../dispatch/cold-start-queue';
import type { Job, JobFailure, JobListener } from '../dispatch/job';
import type { RateLimitDecision, RateLimiter } from '../rate-limits/rate-limit-decision';
import type { UsageInput } from '../usage/usage-recorder';
import type { Usage } from '../../proto/worker/v1';
import type { FinishedRequest, RequestObserver, RequestPhases, WorkOutcome } from './finished-request';
import type { RequestSpans } from './request-spans';
import type { ContentCapture } from './request-content';

export type { WorkOutcome };

/** What settlement writes to: the key's day budget, the usage records, and the observers (metrics, rollups, the request log). */
export interface Settlement {
  readonly rateLimiter: Pick<RateLimiter, 'settle'>;
  readonly usage: { record(input: UsageInput): void };
  /** Hears every settled request (metrics per deployment and their tokens, rollups, the request log); not a released one. */
  readonly observer: RequestObserver;
  readonly now: () => number;
}

/** Who a request's usage record belongs to and how it is labelled. */
export interface TicketOwner {
  readonly workspaceId: string;
  readonly apiKeyId: string;
  /** The deployment that runs the request: the caller's own, or for a guest the owner's deployment it was placed on. */
  readonly deploymentId: string;
  /**
   * A guest's: the shared model it called (`shared/<model-id>`), its record's `shared_model`
   * and the request's label, so nothing the guest sees names the owner's deployment. Null for
   * an owner's request.
   */
  readonly sharedModel: string | null;
  readonly endpoint: string;
  readonly stream: boolean;
  /** Whether the record names the replica that ran it (a guest's and a batch line's never do). */
  readonly recordsReplica: boolean;
  /** A batch line's batch: its record carries it, so a batch's tokens can be summed. */
  readonly batchId?: string;
  /** The catalog model id the request ran on. */
  readonly model: string;
  /** The gateway's request id; absent for work no HTTP request carries (a batch line). */
  readonly requestId?: string;
  /** The W3C trace id of the request's trace, when tracing is on. */
  readonly traceId?: string;
  /** Collects its bodies for the request log; only where the workspace stores them. */
  readonly content?: ContentCapture;
  /** The LoRA adapter `model` named (docs/adapters.md); absent for the base model. */
  readonly adapter?: FinishedRequest['adapter'];
}

/** What differs between an owner's and a guest's request once admitted. */
export interface TicketParts {
  /**
   * Sends one job of the request (a text request has one, an embeddings request one per engine
   * batch); `traceparent`, when tracing is on, goes into its Assign.
   */
  send(listener: JobListener, body: Buffer | undefined, traceparent: string | undefined): Job;
  /**
   * Before the request's first job is sent: null when it can be sent now; else the wait for a
   * first replica (the cold-start queue), resolving with the milliseconds waited, or null when
   * the client left meanwhile; rejecting with the refusal past the queue's bounds.
   */
  waitForReplica?(client: ClientPresence | null): Promise<number | null> | null;
  /** After the usage record: a guest's bill (or the release of its credit hold). */
  finish?(outcome: WorkOutcome, usage: Usage | undefined): void;
  /** The first byte reached the client, this long after the request arrived. */
  firstToken?(ms: number): void;
}

/**
 * When the request is settled. `terminal`: at its job's terminal event (a chat or completions
 * request has one job, and its record is written before the answer's last byte, as a client
 * that reads its usage right after expects). `closed`: once the route is done and every job it
 * sent has ended (an embeddings request fans out into several jobs, summed into one record).
 * `explicit`: by whoever holds the ticket (a batch line's runner, which alone knows whether the
 * line runs again).
 */
export type SettleWhen = 'terminal' | 'closed' | 'explicit';

/** No tokens: the usage of a request none of whose jobs reported any. */
const NO_USAGE: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
/** The outcome of several jobs: the worst of theirs. */
const OUTCOME_RANK: Record<WorkOutcome, number> = { succeeded: 0, canceled: 1, failed: 2 };

/**
 * One admitted request, from admission to settlement, and the one writer of usage records.
 * Every hold taken at admission (the TPD hold, a guest's credit) is given back on every path
 * the request can end by, in one place: settled to the usage its jobs' terminal events report
 * (each job sent through `dispatch` is metered here, whatever listens to it), or released
 * whole when no job was ever sent. The pipeline runs a request through it (`InferencePipeline.run`);
 * the routes used to repeat that rule each in their own way.
 */
export class WorkTicket {
  private sent = 0;
  private ended = 0;
  private closed = false;
  private settled = false;
  private outcome: WorkOutcome = 'succeeded';
  private usage: Usage | undefined;
  private replicaId: string | null = null;
  private finishReason: string | null = null;
  private errorCode: string | null = null;
  private ttftMs: number | null = null;
  // The request's steps in ms after `startedAt` (FinishedRequest.phases), -1 until reached: plain
  // numbers, so the timeline costs no object until settlement builds one.
  private readonly admittedMs: number;
  private dispatchedMs = -1;
  private agentStartedMs = -1;
  private firstChunkMs = -1;
  /** The agent queued a job of this request (its start then comes with an `accepted` event). */
  private waited = false;

  constructor(
    /** The rate-limit state at admission, for the response headers. */
    readonly rateLimit: RateLimitDecision,
    private readonly owner: TicketOwner,
    private readonly parts: TicketParts,
    private readonly settlement: Settlement,
    private readonly startedAt: number,
    private readonly settleWhen: SettleWhen = 'terminal',
    /** The request's pipeline spans; null when tracing is off (nothing is traced, nothing is made). */
    private readonly spans: RequestSpans | null = null,
  ) {
    this.admittedMs = settlement.now() - startedAt;
  }

  /** The LoRA adapter's name the client addressed, or undefined for the base model: what answers carry in `model`. */
  get adapterName(): string | undefined {
    return this.owner.adapter?.name;
  }

  /** The metrics and log label (and a guest's response scope): the deployment id, or a guest's `shared/<model-id>`. */
  get label(): string {
    return this.owner.sharedModel ?? this.owner.deploymentId;
  }

  /** Null when the job can be sent now, else the wait for a first replica (TicketParts.waitForReplica). */
  waitForReplica(client: ClientPresence | null): Promise<number | null> | null {
    return this.parts.waitForReplica?.(client) ?? null;
  }

  /**
   * Sends a job of this request, metered from its terminal event before `listener` hears it;
   * throws (nothing sent, nothing to settle for it) when it cannot be placed.
   */
  dispatch(listener: JobListener, body?: Buffer): Job {
    const metered = new MeteredListener(listener, this, this.owner.content);
    const { spans } = this;
    let job: Job;
    try {
      job = this.parts.send(metered, body, spans?.dispatching());
    } catch (error) {
      spans?.notPlaced(error);
      throw error;
    }
    spans?.placed(job);
    metered.job = job;
    this.sent++;
    if (this.dispatchedMs < 0) this.dispatchedMs = this.settlement.now() - this.startedAt;
    return job;
  }

  /**
   * Settles the request now with this outcome and usage (`explicit` tickets: a batch line):
   * the TPD hold becomes the real usage, the usage record is written, a guest is billed. Once;
   * later calls, and a settle after a release, are ignored.
   */
  settle(outcome: WorkOutcome, usage: Usage | undefined, replicaId: string | null, finish?: { reason?: string; errorCode?: string }): void {
    if (this.settled) return;
    this.settled = true;
    const { rateLimiter, usage: records, observer, now } = this.settlement;
    const total = usage?.totalTokens ?? 0;
    rateLimiter.settle(this.rateLimit.hold, total);
    const { owner } = this;
    const latencyMs = now() - this.startedAt;
    records.record({
      workspaceId: owner.workspaceId, apiKeyId: owner.apiKeyId, deploymentId: owner.deploymentId, sharedModel: owner.sharedModel,
      replicaId: owner.recordsReplica ? replicaId : null,
      endpoint: owner.endpoint, status: outcome, stream: owner.stream, promptTokens: usage?.promptTokens ?? 0,
      completionTokens: usage?.completionTokens ?? 0, totalTokens: total, latencyMs, createdAt: new Date(this.startedAt),
      ...(owner.batchId ? { batchId: owner.batchId } : {}), ...(owner.adapter ? { adapterId: owner.adapter.id } : {}),
    });
    this.parts.finish?.(outcome, usage);
    const finished: FinishedRequest = {
      workspaceId: owner.workspaceId, apiKeyId: owner.apiKeyId, deploymentId: owner.deploymentId, sharedModel: owner.sharedModel,
      model: owner.model, adapter: owner.adapter ?? null, endpoint: owner.endpoint, stream: owner.stream, batchId: owner.batchId, outcome,
      finishReason: finish?.reason ?? this.finishReason, errorCode: outcome === 'succeeded' ? null : finish?.errorCode ?? this.errorCode ?? outcome,
      promptTokens: usage?.promptTokens ?? 0, completionTokens: usage?.completionTokens ?? 0, cachedTokens: usage?.cachedTokens ?? 0,
      startedAt: this.startedAt, latencyMs, ttftMs: this.ttftMs, replicaId, requestId: owner.requestId ?? null, traceId: owner.traceId ?? null,
      phases: this.phases(latencyMs), content: owner.content?.content(),
    };
    observer.requestFinished(finished);
    this.spans?.finished(finished);
  }

  /** The first byte reached the client `ms` after the request arrived. */
  firstToken(ms: number): void {
    this.ttftMs ??= ms;
    this.parts.firstToken?.(ms);
  }

  /**
   * A stream's first chunk of output arrived (the sink writes it in the same turn): its time to
   * first token, on the clock `latencyMs` is measured on. Marked here, not by `firstToken`:
   * the route hears when its first byte went out only once the whole answer is written, after
   * a `terminal` ticket has settled and its observers have read the request.
   */
  firstChunk(): void {
    if (this.firstChunkMs >= 0) return;
    this.firstChunkMs = this.settlement.now() - this.startedAt;
    if (this.ttftMs === null && this.owner.stream) this.ttftMs = this.firstChunkMs;
  }

  /**
   * The request's side that carried the answer is done. One that never sent a job has no
   * terminal event to settle it: its holds go back whole, and it leaves no usage record. One
   * that did is settled by its jobs' terminal events, which may come later (after a client
   * left, the cancel's).
   */
  close(): void {
    this.closed = true;
    if (this.settled) return;
    if (this.sent === 0) {
      this.release();
      return;
    }
    if (this.settleWhen === 'closed' && this.ended === this.sent) this.settleNow();
  }

  /** Gives every hold back whole, with no usage record: nothing ran (a batch line that waits for its key's budget, or goes back to its queue). */
  release(): void {
    if (this.settled) return;
    this.settled = true;
    this.settlement.rateLimiter.settle(this.rateLimit.hold, 0);
    this.parts.finish?.('failed', undefined);
    this.spans?.released();
  }

  /** A job of this request was queued by its agent (`queued`), or started after waiting (not `queued`). */
  jobAccepted(queued: boolean): void {
    if (queued) {
      this.waited = true;
      this.spans?.queued();
      return;
    }
    if (this.agentStartedMs < 0) this.agentStartedMs = this.settlement.now() - this.startedAt;
    this.spans?.started();
  }

  /**
   * A job this ticket sent ended on `replicaId` (known only now for a job relayed to a peer
   * server): its usage joins the request's, and the request is settled if that was its last.
   */
  jobEnded(outcome: WorkOutcome, usage: Usage | undefined, replicaId: string | undefined, finishReason: string | null, errorCode: string | null): void {
    this.ended++;
    this.replicaId ||= replicaId || null;
    this.finishReason ??= finishReason || null;
    this.errorCode ??= errorCode;
    if (OUTCOME_RANK[outcome] > OUTCOME_RANK[this.outcome]) this.outcome = outcome;
    if (usage) this.usage = this.usage ? sum(this.usage, usage) : usage;
    if (this.settleWhen === 'terminal' || (this.settleWhen === 'closed' && this.closed && this.ended === this.sent)) this.settleNow();
  }

  /** The request's usage once every job it sent has ended; undefined while one still runs. */
  get endedUsage(): Usage | undefined {
    return this.ended === this.sent ? this.usage ?? NO_USAGE : undefined;
  }

  private settleNow(): void {
    this.settle(this.outcome, this.usage, this.replicaId);
  }

  /**
   * The timeline's one object, made at settlement. A job the agent did not queue started as it
   * arrived there, so its start is its dispatch (agents send no event for it: one frame fewer
   * per request); one that waited started at its `accepted{queued: false}`.
   */
  private phases(endedMs: number): RequestPhases {
    const phases: RequestPhases = { admittedMs: this.admittedMs, endedMs };
    if (this.dispatchedMs >= 0) phases.dispatchedMs = this.dispatchedMs;
    const startedMs = this.agentStartedMs >= 0 ? this.agentStartedMs : this.waited ? -1 : this.dispatchedMs;
    if (startedMs >= 0) phases.startedMs = startedMs;
    if (this.firstChunkMs >= 0) phases.firstTokenMs = this.firstChunkMs;
    return phases;
  }
}

/** A job's listener with its terminal event metered on the ticket first. */
class MeteredListener implements JobListener {
  job: Job | undefined;
  private chunked = false;

  constructor(private readonly listener: JobListener, private readonly ticket: WorkTicket, private readonly capture: ContentCapture | undefined) {}

  onChunk(data: Buffer): void {
    if (!this.chunked) {
      this.chunked = true;
      this.ticket.firstChunk();
    }
    this.capture?.chunk(data);
    this.listener.onChunk(data);
  }

  onAccepted(queued: boolean): void {
    this.ticket.jobAccepted(queued);
    this.listener.onAccepted?.(queued);
  }

  onOutput(data: Buffer, contentType: string, objectKey: string): void {
    this.capture?.output(data);
    this.listener.onOutput(data, contentType, objectKey);
  }

  onProgress(percent: number, stage: string): void {
    this.listener.onProgress?.(percent, stage);
  }

  /** Completed after a cancel (the client left, the deadline passed): canceled, metered for what it made. */
  onCompleted(usage: Usage | undefined, finishReason: string): void {
    const canceled = this.job?.canceled ?? false;
    this.ticket.jobEnded(canceled ? 'canceled' : 'succeeded', usage, this.job?.replicaId, finishReason, canceled ? 'canceled' : null);
    this.listener.onCompleted(usage, finishReason);
  }

  onFailed(failure: JobFailure): void {
    this.ticket.jobEnded(failure.code === 'canceled' ? 'canceled' : 'failed', failure.usage, this.job?.replicaId, null, failure.code);
    this.listener.onFailed(failure);
  }
}

function sum(a: Usage, b: Usage): Usage {
  return {
    promptTokens: a.promptTokens + b.promptTokens, completionTokens: a.completionTokens + b.completionTokens, totalTokens: a.totalTokens + b.totalTokens,
    cachedTokens: (a.cachedTokens ?? 0) + (b.cachedTokens ?? 0),
  };
}

