import type { ServerResponse } from 'node:http';
import type { Usage } from '../../proto/worker/v1';
import { type AppError, errorBody, jobFailureError } from '../../control-plane/api/errors';
import type { JobFailure, JobListener } from '../../control-plane/api/inference';
import { ResponseFlow, type ResponseFlowOptions } from '../http/response-flow';

export type JobOutcome = 'succeeded' | 'failed' | 'canceled';

export interface TextJobCallbacks {
  /** The HTTP side is settled: written in full, or `error` must still be rendered by the caller. */
  respond(error?: AppError): void;
  /** The job's terminal event arrived (also after a cancel): what to meter. */
  meter(outcome: JobOutcome, usage: Usage | undefined): void;
  /** The client took `bytes` more of the stream: the job may produce that many more. */
  consumed(bytes: number): void;
  /** The client stopped reading before the job ended: it is abandoned like a disconnect (the socket is destroyed here). */
  stalled(): void;
}

const SSE_HEADERS = ['content-type', 'text/event-stream; charset=utf-8', 'cache-control', 'no-cache', 'connection', 'keep-alive', 'x-accel-buffering', 'no'];
const DONE = Buffer.from('data: [DONE]\n\n');

/**
 * Writes one job's events to the raw HTTP response: engine SSE bytes go out as they arrive
 * (no parsing, no re-serialising), and as the client takes them the job is let produce more
 * (response-flow.ts); a non-streamed body is sent once the job completes.
 * A failure after the first byte becomes a final `data: {"error": ...}` event.
 */
export class TextJobResponse implements JobListener {
  private started = false;
  private output: Buffer | null = null;
  private ended = false;
  /** `performance.now()` when a stream's first byte was written; 0 before, and for non-streamed responses. */
  firstByteAt = 0;
  private readonly flow: ResponseFlow;

  constructor(
    private readonly response: ServerResponse,
    private readonly stream: boolean,
    private readonly headers: string[],
    private readonly callbacks: TextJobCallbacks,
    flowOptions: ResponseFlowOptions,
  ) {
    this.flow = new ResponseFlow(response, flowOptions, { consumed: callbacks.consumed, stalled: () => this.onStalled() });
  }

  get isEnded(): boolean {
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

  onCompleted(usage: Usage | undefined): void {
    this.callbacks.meter(this.ended ? 'canceled' : 'succeeded', usage);
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
    this.callbacks.respond();
  }

  onFailed(failure: JobFailure): void {
    this.callbacks.meter(failure.code === 'canceled' ? 'canceled' : 'failed', failure.usage);
    this.fail(jobFailureError(failure));
  }

  /** Ends the response with `error`: a final SSE error event once streaming, else handed back. */
  fail(error: AppError): void {
    if (this.ended) return;
    this.ended = true;
    if (this.started) {
      this.flow.end(`data: ${JSON.stringify(errorBody(error))}\n\n`);
      this.callbacks.respond();
    } else {
      this.callbacks.respond(error);
    }
  }

  /** The client went away: nothing more is written. */
  abandon(): void {
    if (this.ended) return;
    this.ended = true;
    this.callbacks.respond();
  }

  /**
   * The client holds its socket open and reads nothing: the job is let go as for a disconnect
   * (while it runs), and the socket with what it still buffers is destroyed (also after the end).
   */
  private onStalled(): void {
    if (!this.ended) {
      this.ended = true;
      this.callbacks.stalled();
      this.callbacks.respond();
    }
    this.response.destroy();
  }

  private start(contentHeaders: string[]): void {
    this.started = true;
    if (this.stream) this.firstByteAt = performance.now();
    this.headers.push(...contentHeaders);
    this.response.writeHead(200, this.headers);
  }
}
