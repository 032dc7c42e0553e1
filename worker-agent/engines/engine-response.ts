/**
 * The two ways an engine answers, shared by every adapter so the in-process CPU engine and
 * an HTTP engine are treated byte-for-byte alike.
 */
import type { Usage } from '../../proto/worker/v1/index';
import type { EngineResult, EngineSink } from './engine';
import { EngineFailure } from './engine-failure';
import { SseEventFilter } from './sse-event-filter';
import { estimateTokensOfText, estimateUsage, usageFromOpenAi } from './usage-estimate';

/** Forwards an SSE body as whole events, awaiting the sink so reads follow the stream's pace. */
export async function forwardEventStream(
  source: AsyncIterable<Buffer>, sink: EngineSink, includeUsage: boolean, promptText: () => string,
): Promise<EngineResult> {
  const filter = new SseEventFilter(includeUsage);
  try {
    for await (const bytes of source) {
      const events = filter.push(bytes);
      if (events) await sink.chunk(events);
    }
  } catch (error) {
    if (error instanceof EngineFailure) throw error;
    throw new EngineFailure('engine_error', `engine stream broke: ${(error as Error).message}`, { cause: error });
  }
  const tail = filter.end();
  if (tail) await sink.chunk(tail);
  if (!filter.sawDone && !filter.finishReason) {
    throw new EngineFailure('engine_error', 'engine stream ended before the response finished');
  }
  return resultOf(filter.usage, filter.finishReason, () => estimateUsage(promptText(), filter.contentEvents));
}

/** Passes a whole JSON body on unchanged; parses it once for usage and the finish reason. */
export async function forwardJsonBody(body: Buffer, sink: EngineSink, promptText: () => string): Promise<EngineResult> {
  let parsed: { usage?: unknown; choices?: Array<{ finish_reason?: unknown; text?: unknown; message?: { content?: unknown } }> };
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch (error) {
    throw new EngineFailure('engine_error', 'engine answered with a body that is not JSON', { cause: error, engineBody: body });
  }
  await sink.output(body, 'application/json');
  const choices = Array.isArray(parsed.choices) ? parsed.choices : [];
  const finishReason = typeof choices[0]?.finish_reason === 'string' ? choices[0].finish_reason : '';
  return resultOf(usageFromOpenAi(parsed.usage), finishReason, () => {
    const text = choices.map((choice) => String(choice.message?.content ?? choice.text ?? '')).join('');
    return estimateUsage(promptText(), estimateTokensOfText(text));
  });
}

function resultOf(usage: Usage | undefined, finishReason: string, estimate: () => Usage): EngineResult {
  if (usage) return { usage, finishReason, usageEstimated: false };
  return { usage: estimate(), finishReason, usageEstimated: true };
}
