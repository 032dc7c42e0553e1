import { parseJsonText } from '../../../common/json-nesting';
import { AppError, jobFailureError } from '../../../control-plane/api/errors';
import type { Job, JobFailure, JobSink } from '../../../control-plane/api/inference';
import type { Usage } from '../../../proto/worker/v1';

/** One piece of a playground answer (PlaygroundChatEventType). */
export interface PlaygroundChatEvent {
  readonly requestId: string;
  readonly content: string;
  readonly done: boolean;
  readonly finishReason: string | null;
  readonly toolCalls: string | null;
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
}

interface ToolCall {
  id: string;
  type: string;
  function: { name: string; arguments: string };
}

interface Queued {
  readonly event: PlaygroundChatEvent;
  /** Chunk bytes it came from: credited to the job once the subscriber takes it. */
  readonly bytes: number;
}

/**
 * A playground chat job's answer as a subscription's items: the pipeline's sink (its ticket
 * meters the job, as for any request) on one side, an async iterator on the other. The engine's
 * SSE chunks become text pieces as they arrive; tool-call fragments are put together and given,
 * whole, with the finish reason and the tokens in the last piece. The job is let produce more as
 * the subscriber takes pieces (the stream window of `/v1`), canceled at the gateway deadline
 * (`gateway_timeout`) or when the subscription ends early; a failure ends the iterator with its
 * error (the subscription's `error` message, with its code).
 */
export class PlaygroundChatStream implements JobSink, AsyncIterableIterator<PlaygroundChatEvent> {
  private readonly queue: Queued[] = [];
  private readonly toolCalls: ToolCall[] = [];
  private failure: AppError | null = null;
  /** Nothing more will be queued (the last piece is in, the job failed, or the subscriber left). */
  private finished = false;
  private abandoned = false;
  /** Told when the subscriber leaves before the job was sent (it waits for a replica). */
  private left: (() => void) | null = null;
  private wake: (() => void) | null = null;
  private job: Job | undefined;
  private partial = '';
  private finishReason: string | null = null;
  private timer: NodeJS.Timeout | undefined;
  private readonly startedAt = performance.now();
  private firstPieceAt = 0;
  private settle: { resolve: (ms: number) => void; reject: (error: AppError) => void } | null = null;

  constructor(private readonly requestId: string, private readonly timeoutMs: number) {}

  admitted(): void {}

  /** ClientPresence: the subscriber went away while the request waited for a replica. */
  onLeft(left: () => void): () => void {
    if (this.abandoned) {
      left();
      return () => {};
    }
    this.left = left;
    return () => {
      this.left = null;
    };
  }

  carry(job: Job): Promise<number> {
    this.job = job;
    if (this.abandoned) job.cancel('client_disconnected');
    this.timer = setTimeout(() => {
      job.cancel('deadline');
      this.fail(new AppError('gateway_timeout', `the request did not finish within ${this.timeoutMs / 1000} s`));
    }, this.timeoutMs);
    return new Promise<number>((resolve, reject) => {
      this.settle = { resolve, reject };
      if (this.finished) this.settled();
    });
  }

  onChunk(data: Buffer): void {
    if (this.finished) return;
    const text = this.readEvents(data.toString('utf8'));
    if (!this.firstPieceAt) this.firstPieceAt = performance.now();
    if (text) this.push({ event: this.piece(text), bytes: data.length });
    else this.job?.consumed(data.length);
  }

  onOutput(): void {}

  onCompleted(usage: Usage | undefined, finishReason: string): void {
    if (this.finished) return;
    const calls = this.toolCalls.filter(Boolean);
    this.push({
      event: {
        ...this.piece(''), done: true, finishReason: this.finishReason ?? (finishReason || null), toolCalls: calls.length > 0 ? JSON.stringify(calls) : null,
        promptTokens: usage?.promptTokens ?? null, completionTokens: usage?.completionTokens ?? null,
      },
      bytes: 0,
    });
    this.end();
  }

  onFailed(failure: JobFailure): void {
    this.fail(jobFailureError(failure));
  }

  async next(): Promise<IteratorResult<PlaygroundChatEvent>> {
    while (this.queue.length === 0 && !this.finished) await new Promise<void>((resolve) => (this.wake = resolve));
    const queued = this.queue.shift();
    if (queued) {
      if (queued.bytes > 0) this.job?.consumed(queued.bytes);
      return { done: false, value: queued.event };
    }
    if (this.failure) {
      const failure = this.failure;
      this.failure = null;
      throw failure;
    }
    return { done: true, value: undefined };
  }

  /** The subscriber completed or went away: the job is let go (metered for what it made). */
  async return(): Promise<IteratorResult<PlaygroundChatEvent>> {
    if (!this.finished) {
      this.abandoned = true;
      this.left?.();
      this.job?.cancel('client_disconnected');
      this.end();
    }
    this.queue.length = 0;
    return { done: true, value: undefined };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** Ends the answer with `error`, unless it already ended. */
  fail(error: AppError): void {
    if (this.finished) return;
    this.failure = error;
    this.end();
  }

  /** The text the complete SSE events in `text` add; tool-call fragments and the finish reason are kept for the last piece. */
  private readEvents(text: string): string {
    const lines = (this.partial + text).split('\n');
    this.partial = lines.pop() ?? '';
    let content = '';
    for (const line of lines) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (!data || data === '[DONE]') continue;
      let chunk: { choices?: Array<{ delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }> };
      try {
        // An engine's bytes (vLLM's, say): parsed as tenant text is, nesting checked first.
        chunk = parseJsonText(data) as typeof chunk;
      } catch {
        continue;
      }
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      if (typeof choice.delta?.content === 'string') content += choice.delta.content;
      if (Array.isArray(choice.delta?.tool_calls)) for (const fragment of choice.delta.tool_calls) this.addToolCall(fragment);
      if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
    }
    return content;
  }

  private addToolCall(fragment: { index?: unknown; id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }): void {
    const index = typeof fragment.index === 'number' && fragment.index >= 0 && fragment.index < 128 ? fragment.index : this.toolCalls.length;
    const call = this.toolCalls[index] ?? (this.toolCalls[index] = { id: '', type: 'function', function: { name: '', arguments: '' } });
    if (typeof fragment.id === 'string') call.id = fragment.id;
    if (typeof fragment.type === 'string') call.type = fragment.type;
    if (typeof fragment.function?.name === 'string') call.function.name += fragment.function.name;
    if (typeof fragment.function?.arguments === 'string') call.function.arguments += fragment.function.arguments;
  }

  private piece(content: string): PlaygroundChatEvent {
    return { requestId: this.requestId, content, done: false, finishReason: null, toolCalls: null, promptTokens: null, completionTokens: null };
  }

  private push(queued: Queued): void {
    this.queue.push(queued);
    this.wake?.();
  }

  private end(): void {
    this.finished = true;
    clearTimeout(this.timer);
    this.wake?.();
    this.settled();
  }

  /** The pipeline's `carry` resolves once the answer ended: rejected when it failed before its first piece, as an HTTP sink does. */
  private settled(): void {
    if (!this.settle) return;
    const { resolve, reject } = this.settle;
    this.settle = null;
    if (this.failure && !this.firstPieceAt) reject(this.failure);
    else resolve(this.firstPieceAt ? this.firstPieceAt - this.startedAt : 0);
  }
}
