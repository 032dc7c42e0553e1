/**
 * The two ways an engine answers, shared by every adapter so the in-process CPU engine and
 * an HTTP engine are treated byte-for-byte alike.
 */
import type { Usage } from '../../proto/worker/v1/index';
import type { EngineResult, EngineSink } from './engine';
import { EngineFailure, withUsage } from './engine-failure';
import { NotJsonHere, topLevelMembers } from '../../common/json-spans';
import { SseEventFilter } from './sse-event-filter';
import { estimateTokensOfText, estimateUsage, usageFromOpenAi } from './usage-estimate';
import { parseJsonText } from '../../common/json-nesting';
import { renameBodyModel, renameMemberModel, type ModelRename } from './model-rename';

/**
 * Forwards an engine's SSE bytes as whole events and keeps what billing needs (usage, the
 * finish reason, content events for an estimate). Push-based, so an HTTP handler can feed it
 * without an async iterator per chunk.
 */
export class StreamForwarder {
  private readonly filter: SseEventFilter;

  /** @param rename the engine's model name to answer as the catalog model (WORKER_ENGINE_MODEL): done in the filter's byte scan, see model-rename.ts */
  constructor(private readonly sink: EngineSink, includeUsage: boolean, private readonly promptText: () => string, rename?: ModelRename) {
    this.filter = new SseEventFilter(includeUsage, rename);
  }

  /** A promise means the sink is saturated: read no more until it settles. */
  push(bytes: Buffer): Promise<void> | undefined {
    const events = this.filter.push(bytes);
    return events ? this.sink.chunk(events) : undefined;
  }

  async finish(): Promise<EngineResult> {
    const tail = this.filter.end();
    if (tail) await this.sink.chunk(tail);
    if (!this.filter.sawDone && !this.filter.finishReason) {
      throw new EngineFailure('engine_error', 'engine stream ended before the response finished', { usage: this.partialUsage() });
    }
    return resultOf(this.filter.usage, this.filter.finishReason, () => this.partialUsage(), this.filter.responseId);
  }

  /** What was consumed so far: the engine's own count if it sent one, else an estimate. */
  partialUsage(): Usage {
    return this.filter.usage ?? estimateUsage(this.promptText(), this.filter.contentEvents);
  }
}

/** Forwards an SSE body (an async iterable, e.g. the in-process CPU engine) as whole events. */
export async function forwardEventStream(
  source: AsyncIterable<Buffer>, sink: EngineSink, includeUsage: boolean, promptText: () => string,
): Promise<EngineResult> {
  const forwarder = new StreamForwarder(sink, includeUsage, promptText);
  try {
    for await (const bytes of source) await forwarder.push(bytes);
  } catch (error) {
    if (error instanceof EngineFailure) throw withUsage(error, forwarder.partialUsage());
    throw new EngineFailure('engine_error', `engine stream broke: ${(error as Error).message}`, { cause: error, usage: forwarder.partialUsage() });
  }
  return await forwarder.finish();
}

/**
 * Passes a whole JSON body on unchanged, but for `model` when `rename` says the engine answers
 * under another name than the catalog's (spliced into the bytes, not re-serialised: the numbers
 * and text stay the engine's); parses it once for usage and the finish reason.
 */
export async function forwardJsonBody(body: Buffer, sink: EngineSink, promptText: () => string, rename?: ModelRename): Promise<EngineResult> {
  let parsed: { id?: unknown; model?: unknown; usage?: unknown; choices?: Array<{ finish_reason?: unknown; text?: unknown; message?: { content?: unknown } }> };
  try {
    parsed = parseJsonText(body) as typeof parsed;
  } catch (error) {
    throw new EngineFailure('engine_error', 'engine answered with a body that is not JSON', { cause: error, engineBody: body });
  }
  await sink.output(rename && parsed.model === rename.engineModel ? renamedBody(body, parsed, rename) : body, 'application/json');
  const choices = Array.isArray(parsed.choices) ? parsed.choices : [];
  const finishReason = typeof choices[0]?.finish_reason === 'string' ? choices[0].finish_reason : '';
  return resultOf(usageFromOpenAi(parsed.usage), finishReason, () => {
    const text = choices.map((choice) => String(choice.message?.content ?? choice.text ?? '')).join('');
    return estimateUsage(promptText(), estimateTokensOfText(text));
  }, typeof parsed.id === 'string' ? parsed.id : undefined);
}

/**
 * An embeddings answer, passed on unchanged but for a renamed `model` (as forwardJsonBody). Its
 * `usage` and `model` are read from the body's spans, not by parsing it: the body is mostly
 * numbers (see json-spans.ts). A body the spans cannot read goes the JSON.parse way, which also
 * refuses one that is not JSON.
 */
export async function forwardEmbeddingsBody(body: Buffer, sink: EngineSink, promptText: () => string, rename?: ModelRename): Promise<EngineResult> {
  let usage: Usage | undefined;
  let answer = body;
  try {
    const members = topLevelMembers(body);
    const span = members.get('usage');
    usage = span ? usageFromOpenAi(parseJsonText(body.subarray(span.start, span.end))) : undefined;
    if (usage && rename) answer = renameMemberModel(body, members, rename);
  } catch (error) {
    if (!(error instanceof NotJsonHere) && !(error instanceof SyntaxError)) throw error;
  }
  if (!usage) return await forwardJsonBody(body, sink, promptText, rename);
  await sink.output(answer, 'application/json');
  return { usage, finishReason: '', usageEstimated: false };
}

/** The body with the catalog model in `model`: spliced into the engine's bytes, or (spans that cannot read them, rare) written anew from the parse. */
function renamedBody(body: Buffer, parsed: object, rename: ModelRename): Buffer {
  return renameBodyModel(body, rename) ?? Buffer.from(JSON.stringify({ ...parsed, model: rename.catalogModel }));
}

function resultOf(usage: Usage | undefined, finishReason: string, estimate: () => Usage, responseId?: string): EngineResult {
  if (usage) return { usage, finishReason, usageEstimated: false, responseId };
  return { usage: estimate(), finishReason, usageEstimated: true, responseId };
}
