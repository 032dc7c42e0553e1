import type { ServerResponse } from 'node:http';
import type { Usage } from '../../proto/worker/v1';
import { AppError, errorBody, jobFailureError } from '../../control-plane/api/errors';
import type { AuthenticatedKey, Job, JobFailure, JobSink, RateLimitDecision } from '../../control-plane/api/inference';
import { ResponseFlow, type ResponseFlowEvents, type ResponseFlowOptions } from '../http/response-flow';
import { rateLimitHeaders } from '../http/rate-limit-headers';
import type { RequestTrace } from '../http/request-id';
import { traceparentHeader } from '../http/request-span';

export interface TextRouteOptions {
  maxBodyBytes: number;
  requestTimeoutMs: number;
}

/** What a client that reads slower than its job produces may cost (gateway configuration). */
export interface StreamLimits {
  /** A client that takes no byte of its response for this long is gone: its job is canceled (`client_stalled`). */
  streamStallTimeoutMs: number;
  /** A streamed job's window: chunk bytes its agent may produce ahead of what the client took. */
  streamBufferBytes: number;
}

/**
 * Bytes waiting for one client beyond which it counts as stalled at once: twice the window, as
 * an agent honouring it may overshoot by one engine read and credit lags by half a window.
 * Only a producer that ignores the window (an agent older than flow control) reaches it.
 */
export const BUFFER_LIMIT_WINDOWS = 2;

export const SSE_HEADERS = ['content-type', 'text/event-stream; charset=utf-8', 'cache-control', 'no-cache', 'connection', 'keep-alive', 'x-accel-buffering', 'no'];
const DONE = Buffer.from('data: [DONE]\n\n');

/** What `guardJob` asks of a sink: whether its answer ended, and how to end it. */
export interface GuardedAnswer {
  isEnded(): boolean;
  /** The deadline passed: end the answer with this error (written, or thrown before the first byte). */
  fail(error: AppError): void;
  /** The client went away: write nothing more. */
  abandon(): void;
}

/**
 * The two ways a sink's job is cut short from the HTTP side: the gateway deadline (the answer
 * ends with a 504 and the job is canceled) and the client going away before the answer ended
 * (the job is canceled and metered for what it made). Returns what stops the deadline.
 */
export function guardJob(response: ServerResponse, job: Job, timeoutMs: number, answer: GuardedAnswer): () => void {
  const timer = setTimeout(() => {
    answer.fail(new AppError('gateway_timeout', `the request did not finish within ${timeoutMs / 1000} s`));
    job.cancel('deadline');
  }, timeoutMs);
  response.once('close', () => {
    if (answer.isEnded()) return;
    answer.abandon();
    job.cancel('client_disconnected');
  });
  return () => clearTimeout(timer);
}

/** Calls `left` once if the response closes (the client went away) before it is answered; returns what stops listening. */
export function onResponseClosed(response: ServerResponse, left: () => void): () => void {
  if (response.destroyed) {
    left();
    return () => {};
  }
  response.once('close', left);
  return () => response.off('close', left);
}

/**
 * A chat or completions job's answer on the raw HTTP response, the pipeline's sink
 * (`InferencePipeline.run`): engine SSE bytes go out as they arrive (no parsing, no
 * re-serialising), and as the client takes them the job is let produce more
 * (response-flow.ts); a non-streamed body is sent once the job completes. A failure after the
 * first byte becomes a final `data: {"error": ...}` event; one before it is thrown for the
 * caller to render. The job is canceled at the gateway deadline, when the client goes away,
 * or when it stops reading (`client_stalled`). It meters nothing: the pipeline's ticket does,
 * from the job's terminal event.
 */
export class HttpTextSink implements JobSink, ResponseFlowEvents {
  private started = false;
  private output: Buffer | null = null;
  private ended = false;
  /** `performance.now()` when a stream's first byte was written; 0 before, and for non-streamed responses. */
  private firstByteAt = 0;
  private readonly flow: ResponseFlow;
  private readonly headers: string[] = [];
  private job: Job | undefined;
  /** How the HTTP side ended (undefined: written in full or the client left; an error: to render), once it has. */
  private answer: { readonly error: AppError | undefined } | null = null;
  private wake: ((error: AppError | undefined) => void) | null = null;

  // No closure is made here (docs/performance.md: one allocated per request in the constructor is
  // promoted to old space with everything it reaches): the flow reports to this object's methods.
  constructor(
    private readonly response: ServerResponse,
    private readonly stream: boolean,
    private readonly key: AuthenticatedKey,
    private readonly trace: RequestTrace,
    private readonly options: { requestTimeoutMs: number; limits: StreamLimits; memory?: ResponseFlowOptions['memory'] },
  ) {
    this.flow = new ResponseFlow(response, {
      stallTimeoutMs: options.limits.streamStallTimeoutMs, maxBufferedBytes: BUFFER_LIMIT_WINDOWS * options.limits.streamBufferBytes, memory: options.memory,
    }, this);
  }

  admitted(rateLimit: RateLimitDecision): void {
    this.headers.push(...rateLimitHeaders(rateLimit, this.key.rpmLimit, this.key.tpdLimit), 'x-request-id', this.trace.id);
    if (this.trace.span) this.headers.push('traceparent', traceparentHeader(this.trace.span));
  }

  /** ClientPresence: the client went away while the request waited for a replica (nothing written yet). */
  onLeft(left: () => void): () => void {
    return onResponseClosed(this.response, left);
  }

  async carry(job: Job): Promise<number> {
    this.job = job;
    const unguard = guardJob(this.response, job, this.options.requestTimeoutMs, this);
    const error = this.answer ? this.answer.error : await new Promise<AppError | undefined>((resolve) => (this.wake = resolve));
    unguard();
    if (error) throw error;
    return this.firstByteAt ? this.firstByteAt - this.trace.receivedAt : 0;
  }

  /** ResponseFlowEvents: the client took `bytes` more of the stream, so the job may produce that many more. */
  consumed(bytes: number): void {
    this.job?.consumed(bytes);
  }

  /**
   * ResponseFlowEvents: the client holds its socket open and reads nothing. The job is let go as
   * for a disconnect (while it runs), and the socket with what it still buffers is destroyed (also after the end).
   */
  stalled(): void {
    if (!this.ended) {
      this.ended = true;
      this.job?.cancel('client_stalled');
      this.respond();
    }
    this.response.destroy();
  }

  /** GuardedAnswer: whether the answer ended. */
  isEnded(): boolean {
    return this.ended;
  }

  onChunk(data: Buffer): void {
    if (this.ended) return;
    if (!this.started) this.start(SSE_HEADERS);
    this.flow.write(data);
  }

  onOutput(data: Buffer): void {
    this.output = data;
  }

  onCompleted(_usage: Usage | undefined): void {
    if (this.ended) return;
    this.ended = true;
    if (this.stream) {
      if (!this.started) this.start(SSE_HEADERS);
      this.flow.end(DONE);
    } else {
      const body = this.output ?? Buffer.from('{}');
      this.start(['content-type', 'application/json', 'content-length', String(body.length)]);
      this.flow.end(body);
    }
    this.respond();
  }

  onFailed(failure: JobFailure): void {
    this.fail(jobFailureError(failure));
  }

  /** GuardedAnswer and a failed job: ends the response with `error`, a final SSE error event once streaming, else handed back. */
  fail(error: AppError): void {
    if (this.ended) return;
    this.ended = true;
    if (this.started) {
      this.flow.end(`data: ${JSON.stringify(errorBody(error))}\n\n`);
      this.respond();
    } else {
      this.respond(error);
    }
  }

  /** GuardedAnswer: the client went away, nothing more is written. */
  abandon(): void {
    if (this.ended) return;
    this.ended = true;
    this.respond();
  }

  /** The HTTP side is settled: written in full (or the client left), or `error` is the caller's to render. First call wins. */
  private respond(error?: AppError): void {
    if (this.answer) return;
    this.answer = { error };
    this.wake?.(error);
  }

  private start(contentHeaders: string[]): void {
    this.started = true;
    if (this.stream) this.firstByteAt = performance.now();
    this.headers.push(...contentHeaders);
    this.response.writeHead(200, this.headers);
  }
}
