import type { Job, JobFailure, JobListener } from '../dispatch/job';
import type { Usage } from '../../proto/worker/v1';
import { ChatStreamTranslator, statusOf, usageOf, type ChatResult } from './chat-to-response';
import type { ResponseUsage } from './response-items';
import type { ResponseTurn } from './responses-service';

/** How a background turn's engine job ended. */
export type BackgroundJobEnd =
  | { readonly kind: 'completed'; readonly result: ChatResult }
  | { readonly kind: 'failed'; readonly failure: Pick<JobFailure, 'code' | 'message'>; readonly output: ChatResult['output']; readonly usage: ResponseUsage | null };

/**
 * The listener of a background turn's chat job. The job streams (responses-service.ts) and
 * nobody waits on the chunks: each is credited back to the agent at once and folded into the
 * output items. The ticket meters the terminal event before this listener hears it, exactly as
 * for a synchronous turn (billed as chat; a cancelled job for what it generated); the end goes to
 * the runner, which decides what it means for the row (cancelled, put back, failed).
 */
export class BackgroundTurnListener implements JobListener {
  readonly ended: Promise<BackgroundJobEnd>;
  private resolve!: (end: BackgroundJobEnd) => void;
  private readonly translator = new ChatStreamTranslator();
  private job: Job | undefined;

  constructor(private readonly turn: ResponseTurn) {
    this.ended = new Promise((resolve) => (this.resolve = resolve));
  }

  attach(job: Job): void {
    this.job = job;
  }

  onChunk(data: Buffer): void {
    this.translator.push(data);
    this.job?.consumed(data.length);
  }

  onOutput(): void {}

  onCompleted(usage: Usage | undefined): void {
    this.translator.push(Buffer.from('\n\n'));
    this.translator.finish(false);
    const used = this.translator.usage ?? usageFrom(usage);
    if (this.translator.error) {
      this.resolve({ kind: 'failed', failure: { code: 'upstream_error', message: this.translator.error.message }, output: this.translator.output, usage: used });
      return;
    }
    this.resolve({ kind: 'completed', result: { ...statusOf(this.translator.finishReason), output: this.translator.output, usage: used } });
  }

  onFailed(failure: JobFailure): void {
    this.translator.finish(true);
    this.resolve({ kind: 'failed', failure, output: this.translator.output, usage: this.translator.usage ?? usageFrom(failure.usage) });
  }
}

function usageFrom(usage: Usage | undefined): ResponseUsage | null {
  return usage ? usageOf({ prompt_tokens: usage.promptTokens, completion_tokens: usage.completionTokens, total_tokens: usage.totalTokens }) : null;
}
