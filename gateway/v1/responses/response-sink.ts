import type { ServerResponse } from 'node:http';
import { parseJsonText } from '../../../common/json-nesting';
import { AppError, errorBody, jobFailureError } from '../../../control-plane/api/errors';
import { type AuthenticatedKey, chatAnswerToResult, ChatStreamTranslator, type Job, type JobFailure, type JobSink, type RateLimitDecision, type ResponsesService, type ResponseTurn, type ResponseUsage, statusOf, type StreamEvent, type TurnEnd, usageOf } from '../../../control-plane/api/inference';
import type { Usage } from '../../../proto/worker/v1';
import { ResponseFlow } from '../../http/response-flow';
import { rateLimitHeaders } from '../../http/rate-limit-headers';
import type { RequestTrace } from '../../http/request-id';
import { BUFFER_LIMIT_WINDOWS, guardJob, onResponseClosed, SSE_HEADERS, type StreamLimits } from '../http-text-sink';
import { traceparentHeader } from '../../http/request-span';

export interface ResponseJobRun {
  readonly turn: ResponseTurn;
  readonly service: Pick<ResponsesService, 'running' | 'end'>;
  readonly key: AuthenticatedKey;
  readonly trace: RequestTrace;
  readonly requestTimeoutMs: number;
  readonly limits: StreamLimits;
}

/**
 * One Responses turn's chat job on the raw response, the pipeline's sink: a JSON answer becomes
 * the Response object once the job completes; a stream becomes the typed events as chunks
 * arrive (credit goes back to the agent as the client takes the translated bytes, so a slow
 * reader holds the job back as on chat). Settlement is the pipeline's ticket's, from the
 * terminal event, as on chat: a stream the client cut is canceled, metered for what was made,
 * and stored `incomplete`. An error before the first byte is thrown for the caller to render.
 */
export class ResponseSink implements JobSink {
  /** The HTTP side is done (written, handed back as an error, or the client left). */
  private answered = false;
  private readonly settled: Promise<AppError | undefined>;
  private settle: (error?: AppError) => void = () => {};
  private readonly headers: string[] = [];
  private job: Job | undefined;
  private output: Buffer | null = null;
  private readonly translator = new ChatStreamTranslator();
  private flow: ResponseFlow | null = null;
  private sequence = 0;
  /** Chunk bytes from the agent and event bytes written for them: credit is passed back in that ratio. */
  private chunkBytes = 0;
  private eventBytes = 0;
  private consumedEventBytes = 0;
  private creditedChunkBytes = 0;
  private ending: Promise<void> = Promise.resolve();

  constructor(private readonly response: ServerResponse, private readonly run: ResponseJobRun) {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  admitted(rateLimit: RateLimitDecision): void {
    this.headers.push(...rateLimitHeaders(rateLimit, this.run.key.rpmLimit, this.run.key.tpdLimit), 'x-request-id', this.run.trace.id);
    if (this.run.trace.span) this.headers.push('traceparent', traceparentHeader(this.run.trace.span));
  }

  /** ClientPresence: the client went away while the turn waited for a replica (nothing written yet). */
  onLeft(left: () => void): () => void {
    return onResponseClosed(this.response, left);
  }

  async carry(job: Job): Promise<number> {
    this.job = job;
    const unguard = guardJob(this.response, job, this.run.requestTimeoutMs, { isEnded: () => this.answered, fail: (error) => this.fail(error), abandon: () => this.abandon() });
    if (this.run.turn.request.stream) this.startStream();
    try {
      const error = await this.settled;
      if (error) throw error;
    } finally {
      unguard();
    }
    return 0;
  }

  /** A stream's head: `response.created` and `response.in_progress` go out before the first token. */
  private startStream(): void {
    if (this.answered) return;
    const limits = this.run.limits;
    this.flow = new ResponseFlow(this.response, { stallTimeoutMs: limits.streamStallTimeoutMs, maxBufferedBytes: BUFFER_LIMIT_WINDOWS * limits.streamBufferBytes }, {
      consumed: (bytes) => this.consumed(bytes),
      stalled: () => this.stalled(),
    });
    this.response.writeHead(200, [...this.headers, ...SSE_HEADERS]);
    const running = this.run.service.running(this.run.turn);
    this.write([{ type: 'response.created', response: running }, { type: 'response.in_progress', response: running }]);
  }

  onChunk(data: Buffer): void {
    if (this.answered || !this.flow) return;
    this.chunkBytes += data.length;
    this.write(this.translator.push(data));
  }

  onOutput(data: Buffer): void {
    this.output = data;
  }

  onCompleted(usage: Usage | undefined): void {
    const canceled = this.answered;
    if (this.run.turn.request.stream) {
      this.translator.push(Buffer.from('\n\n'));
      const events = this.translator.finish(canceled);
      const usageNow = this.translator.usage ?? usageFrom(usage);
      const end: TurnEnd = canceled
        ? { status: 'incomplete', output: this.translator.output, usage: usageNow, error: null, incompleteDetails: { reason: 'client_disconnected' } }
        : { ...statusOf(this.translator.finishReason), output: this.translator.output, usage: usageNow };
      this.finish(end, events);
      return;
    }
    if (canceled) return;
    let result;
    try {
      result = chatAnswerToResult(parseJsonText(this.output ?? Buffer.from('{}')) as Record<string, unknown>);
    } catch {
      this.fail(new AppError('upstream_error', 'the engine answered a body that is not a chat completion'));
      return;
    }
    result.usage ??= usageFrom(usage);
    this.finish(result, []);
  }

  onFailed(failure: JobFailure): void {
    const canceled = failure.code === 'canceled';
    if (!this.run.turn.request.stream) {
      this.fail(jobFailureError(failure));
      return;
    }
    // A stream cut by its client (or stalled, or past the deadline) keeps what was sent: `incomplete`.
    const usage = this.translator.usage ?? usageFrom(failure.usage);
    const events = this.translator.finish(true);
    const end: TurnEnd = canceled
      ? { status: 'incomplete', output: this.translator.output, usage, error: null, incompleteDetails: { reason: 'client_disconnected' } }
      : { status: 'failed', output: this.translator.output, usage, error: { code: 'server_error', message: jobFailureError(failure).message }, incompleteDetails: null };
    this.finish(end, events);
  }

  /** Ends the HTTP side with `error`: a `response.failed`-style error event once streaming, else handed back. */
  private fail(error: AppError): void {
    if (this.answered) return;
    this.answered = true;
    if (this.flow) {
      const { type: code, ...detail } = errorBody(error).error;
      this.flow.end(this.frame({ type: 'error', ...detail, code: detail.code ?? code }));
      this.settle();
    } else {
      this.settle(error);
    }
  }

  /** The client went away: nothing more is written; the terminal event still stores and settles. */
  private abandon(): void {
    if (this.answered) return;
    this.answered = true;
    this.settle();
  }

  private finish(end: TurnEnd, events: StreamEvent[]): void {
    const wasAnswered = this.answered;
    this.ending = this.ending.then(async () => {
      const object = await this.run.service.end(this.run.turn, end);
      if (wasAnswered || this.answered) return;
      this.answered = true;
      if (this.flow) {
        const type = end.status === 'completed' ? 'response.completed' : end.status === 'failed' ? 'response.failed' : 'response.incomplete';
        this.write(events);
        this.flow.end(this.frame({ type, response: object }));
      } else {
        const body = Buffer.from(JSON.stringify(object));
        this.response.writeHead(200, [...this.headers, 'content-type', 'application/json', 'content-length', String(body.length)]);
        this.response.end(body);
      }
      this.settle();
    }).catch((error: unknown) => {
      const failure = error instanceof AppError ? error : new AppError('service_unavailable', 'the response could not be stored', { cause: error });
      if (!this.answered) this.fail(failure);
    });
  }

  private write(events: StreamEvent[]): void {
    if (events.length === 0 || !this.flow) return;
    let text = '';
    for (const event of events) text += this.frame(event);
    const bytes = Buffer.from(text);
    this.eventBytes += bytes.length;
    this.flow.write(bytes);
  }

  private frame(event: StreamEvent): string {
    const { type, ...rest } = event;
    return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: this.sequence++, ...rest })}\n\n`;
  }

  /** The client took `bytes` of events: the job may send as many chunk bytes as they stood for. */
  private consumed(bytes: number): void {
    this.consumedEventBytes += bytes;
    if (!this.job || this.eventBytes === 0) return;
    const due = Math.floor((this.consumedEventBytes / this.eventBytes) * this.chunkBytes) - this.creditedChunkBytes;
    if (due <= 0) return;
    this.creditedChunkBytes += due;
    this.job.consumed(due);
  }

  private stalled(): void {
    if (!this.answered) {
      this.answered = true;
      this.job?.cancel('client_stalled');
      this.settle();
    }
    this.response.destroy();
  }
}

function usageFrom(usage: Usage | undefined): ResponseUsage | null {
  return usage ? usageOf({ prompt_tokens: usage.promptTokens, completion_tokens: usage.completionTokens, total_tokens: usage.totalTokens }) : null;
}
