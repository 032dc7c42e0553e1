/**
 * One embeddings answer made of the answers of a request's batches: their items in input order
 * (each `index` moved by its batch's offset), the model, and the usage summed.
 */
import { AppError } from '../errors/app-error';
import { arrayElements, NotJsonHere, objectMembers, skipWhitespace, valueEnd } from '../../common/json-spans';
import { parseJsonText } from '../../common/json-nesting';
/** What the assembly reads of a batch (embedding-batches.ts): where its inputs start, and how many. */
interface EmbeddingBatch { offset: number; count: number }

interface Usage { prompt_tokens?: unknown; total_tokens?: unknown }

/**
 * Splices the batches' bytes (see json-spans.ts: building the vectors' numbers and writing them
 * again was most of a large request's cost in the gateway). Answers the spans cannot read, or
 * whose items are not in order, take the parse-and-rebuild way, which also reports what is wrong.
 */
export function assembleEmbeddingLists(batches: readonly EmbeddingBatch[], outputs: readonly Buffer[]): Buffer {
  try {
    const spliced = splice(batches, outputs);
    if (spliced) return spliced;
  } catch (error) {
    if (!(error instanceof NotJsonHere) && !(error instanceof SyntaxError)) throw error;
  }
  return rebuild(batches, outputs);
}

interface ItemSpans { start: number; end: number; indexStart: number; indexEnd: number }

/** Null when an answer's items are not exactly its batch's inputs in order (index 0, 1, … count-1). */
function splice(batches: readonly EmbeddingBatch[], outputs: readonly Buffer[]): Buffer | null {
  const parts: Buffer[] = [Buffer.from('{"object":"list","data":[')];
  let model: string | undefined;
  let promptTokens = 0;
  let totalTokens = 0;
  for (const [position, batch] of batches.entries()) {
    const text = outputs[position];
    const items: ItemSpans[] = [];
    let usage: Usage = {};
    let inOrder = true;
    const end = objectMembers(text, skipWhitespace(text, 0), (key, start) => {
      if (key === 'data') {
        return arrayElements(text, start, (itemStart, at) => {
          const item = itemSpans(text, itemStart);
          inOrder &&= item.indexStart >= 0 && Number(text.toString('latin1', item.indexStart, item.indexEnd)) === at;
          items.push(item);
          return item.end;
        });
      }
      const valueEndsAt = valueEnd(text, start);
      if (key === 'usage') usage = parseJsonText(text.subarray(start, valueEndsAt)) as Usage;
      // The first batch that names one, as the rebuild takes it.
      if (key === 'model' && model === undefined && text.toString('latin1', start, valueEndsAt) !== 'null') model = text.toString('utf8', start, valueEndsAt);
      return valueEndsAt;
    });
    if (skipWhitespace(text, end) !== text.length || !inOrder || items.length !== batch.count) return null;
    for (const [at, item] of items.entries()) {
      if (position > 0 || at > 0) parts.push(COMMA);
      parts.push(text.subarray(item.start, item.indexStart), Buffer.from(String(batch.offset + at)), text.subarray(item.indexEnd, item.end));
    }
    promptTokens += typeof usage.prompt_tokens === 'number' ? usage.prompt_tokens : 0;
    totalTokens += typeof usage.total_tokens === 'number' ? usage.total_tokens : 0;
  }
  const named = model === undefined ? '' : `,"model":${model}`;
  parts.push(Buffer.from(`]${named},"usage":${JSON.stringify({ prompt_tokens: promptTokens, total_tokens: totalTokens })}}`));
  return Buffer.concat(parts);
}

const COMMA = Buffer.from(',');

/** One item's span and its `index` value's (-1 when it has none). */
function itemSpans(text: Buffer, start: number): ItemSpans {
  let indexStart = -1;
  let indexEnd = -1;
  const end = objectMembers(text, start, (key, valueStart) => {
    if (key !== 'index') return undefined;
    indexStart = valueStart;
    indexEnd = valueEnd(text, valueStart);
    return indexEnd;
  });
  return { start, end, indexStart, indexEnd };
}

interface EmbeddingItem { object?: unknown; index?: unknown; embedding?: unknown }
interface EmbeddingList { data?: unknown; model?: unknown; usage?: Usage }

function rebuild(batches: readonly EmbeddingBatch[], outputs: readonly Buffer[]): Buffer {
  const data: EmbeddingItem[] = [];
  let model: unknown;
  let promptTokens = 0;
  let totalTokens = 0;
  batches.forEach((batch, position) => {
    let list: EmbeddingList;
    try {
      list = parseJsonText(outputs[position]) as EmbeddingList;
    } catch (error) {
      throw new AppError('upstream_error', 'the engine answered an embeddings job with a body that is not JSON', { cause: error });
    }
    const items = Array.isArray(list.data) ? (list.data as EmbeddingItem[]) : [];
    if (items.length !== batch.count) {
      throw new AppError('upstream_error', `the engine answered ${items.length} embeddings for a batch of ${batch.count} inputs`);
    }
    const ordered = items
      .map((item, at) => ({ ...item, index: (typeof item.index === 'number' ? item.index : at) + batch.offset }))
      .sort((left, right) => left.index - right.index);
    data.push(...ordered);
    model ??= list.model;
    promptTokens += typeof list.usage?.prompt_tokens === 'number' ? list.usage.prompt_tokens : 0;
    totalTokens += typeof list.usage?.total_tokens === 'number' ? list.usage.total_tokens : 0;
  });
  return Buffer.from(JSON.stringify({ object: 'list', data, model, usage: { prompt_tokens: promptTokens, total_tokens: totalTokens } }));
}
