import { SpanStatusCode, type Span } from '@opentelemetry/api';
import { ATTR } from './span-attributes';

/** A job's token counts, as the wire's `Usage` has them (structurally: common/ imports no proto). */
export interface SpanUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  readonly cachedTokens?: number;
}

/**
 * Ends the span of one job (a relay hop, the agent's job, its engine call) with how it ended:
 * the tokens it used (GenAI usage attributes), its finish reason, or its failure code as the
 * span's error. `completed` and `failed` are the job's terminal event's two cases.
 */
export function endJobSpan(
  span: Span,
  completed: { readonly usage?: SpanUsage | null; readonly finishReason: string } | null,
  failed: { readonly code: string; readonly message: string; readonly usage?: SpanUsage | null } | null,
): void {
  const usage = completed?.usage ?? failed?.usage;
  if (usage) setUsage(span, usage);
  if (completed?.finishReason) span.setAttribute(ATTR.finishReasons, [completed.finishReason]);
  if (failed) {
    span.setAttribute(ATTR.errorType, failed.code);
    span.setStatus({ code: SpanStatusCode.ERROR, message: failed.message });
  }
  span.end();
}

/** The GenAI usage attributes: input, output and cached (prefix-cache) tokens. */
export function setUsage(span: Span, usage: SpanUsage): void {
  span.setAttribute(ATTR.inputTokens, usage.promptTokens);
  span.setAttribute(ATTR.outputTokens, usage.completionTokens);
  if (usage.cachedTokens) span.setAttribute(ATTR.cachedTokens, usage.cachedTokens);
}
