import type { Logger } from 'pino';
import type { WorkTicket } from '../pipeline/work-ticket';
import type { BatchEndpoint } from './batch.entities';
import { LOST_JOB_CODES, type LineRun } from './batch-line-handler';
import { errorLine, LINE_ERROR_MESSAGES, responseLine, succeeded, type BatchLineErrorCode } from './batch-results';
import type { BatchStore, ClaimedLine, LineTokens } from './batch-store';
import { parseJsonText } from '../../common/json-nesting';

/** The usage record's `endpoint`, as live requests name theirs. */
export const USAGE_ENDPOINTS: Record<BatchEndpoint, string> = {
  '/v1/chat/completions': 'chat.completions', '/v1/completions': 'completions', '/v1/embeddings': 'embeddings', '/v1/responses': 'responses',
};

export interface BatchLineResultsParts {
  readonly store: BatchStore;
}

/**
 * What a line that ran leaves behind: its answer (or error) line written under its claim, or the
 * line put back to run again. Its usage is the pipeline ticket's (settleLine). No per-token
 * charge: batch lines cost only the deployment's GPU-hours.
 */
export class BatchLineResults {
  constructor(private readonly parts: BatchLineResultsParts, private readonly owner: string, private readonly logger: Logger) {}

  /**
   * Writes what the line got: its answer; with no answer, the reason the batch stopped it
   * (`stoppedBy`) or a re-queue. True when the line was put back to run again.
   */
  async write(line: ClaimedLine, outcome: LineRun, stoppedBy: BatchLineErrorCode | null): Promise<boolean> {
    const { store } = this.parts;
    const tokens = tokensOf(outcome);
    if (outcome.kind === 'answered') {
      const ok = succeeded(outcome.response.statusCode);
      await store.finishLine(line, this.owner, ok ? 'succeeded' : 'failed', responseLine(line.customId, outcome.response), tokens);
      return false;
    }
    if (stoppedBy) {
      await store.finishLine(line, this.owner, 'failed', errorLine(line.customId, stoppedBy, LINE_ERROR_MESSAGES[stoppedBy]), tokens);
      return false;
    }
    if (!LOST_JOB_CODES.has(outcome.failure.code)) this.logger.warn({ code: outcome.failure.code, batchId: line.batchId }, 'a batch line was lost with an unexpected code');
    return await store.lineLost(line, this.owner, tokens) === 'requeued';
  }

  /** The line did not run and never will (its input's bytes are gone): an error line with `code`. */
  async fail(line: ClaimedLine, code: BatchLineErrorCode): Promise<void> {
    await this.parts.store.finishLine(line, this.owner, 'failed', errorLine(line.customId, code, LINE_ERROR_MESSAGES[code]));
  }
}

/**
 * Settles a line that ran on its pipeline ticket, the one writer of usage records: its usage
 * record (tokens per batch, TPD after a restart) and token metrics. A lost line that used no
 * tokens leaves none (it runs again, or its error line says why), and gives its hold back whole.
 */
export function settleLine(ticket: Pick<WorkTicket, 'settle' | 'release'>, outcome: LineRun): void {
  if (outcome.kind === 'lost' && outcome.usage.totalTokens === 0) {
    ticket.release();
    return;
  }
  const status = outcome.kind === 'answered' ? (succeeded(outcome.response.statusCode) ? 'succeeded' : 'failed') : 'canceled';
  ticket.settle(status, outcome.usage, null);
}

/** A line's body as an object, or {} when it is not one. */
function parseFields(body: string): Record<string, unknown> {
  try {
    const fields = parseJsonText(body);
    return typeof fields === 'object' && fields !== null ? fields as Record<string, unknown> : {};
  } catch {
    return {};
  }
}

/** What a line adds to its batch's usage; cached prompt tokens as the engine's answer reports them. */
function tokensOf(outcome: LineRun): LineTokens {
  const { usage } = outcome;
  let cachedTokens = 0;
  if (outcome.kind === 'answered' && succeeded(outcome.response.statusCode) && outcome.response.body.includes('cached_tokens')) {
    const cached = (parseFields(outcome.response.body).usage as { prompt_tokens_details?: { cached_tokens?: unknown } } | undefined)?.prompt_tokens_details?.cached_tokens;
    if (typeof cached === 'number' && Number.isInteger(cached) && cached >= 0) cachedTokens = cached;
  }
  return { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, totalTokens: usage.totalTokens, cachedTokens };
}
