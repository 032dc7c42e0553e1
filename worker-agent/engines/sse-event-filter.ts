/**
 * Splits an engine's SSE byte stream into whole events and passes them through as bytes.
 * Events are only peeked at (no JSON parse per token): the usage chunk is the one event that
 * gets parsed. Engines serialise compactly (vLLM, SGLang, llama.cpp, TGI) but Python's default
 * `json.dumps` spacing (`"key": value`) is accepted too. With a ModelRename, the engine's name
 * in `"model"` is replaced by the catalog model's in the same scan (model-rename.ts).
 */
import type { Usage } from '../../proto/worker/v1/index';
import { EngineFailure } from './engine-failure';
import { usageFromOpenAi } from './usage-estimate';
import { parseJsonText } from '../../common/json-nesting';
import type { ModelRename } from './model-rename';

const NEWLINE = 0x0a;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const SPACE = 0x20;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const COLON = 0x3a;

/** Keys peeked at, without their opening quote (the scanner stops at every quote). */
const CONTENT_KEY = Buffer.from('content":');
const TEXT_KEY = Buffer.from('text":');
const USAGE_KEY = Buffer.from('usage":');
const CHOICES_KEY = Buffer.from('choices":');
const FINISH_KEY = Buffer.from('finish_reason":');
const MODEL_KEY = Buffer.from('model":');
const DATA = Buffer.from('data:');
const DONE = Buffer.from('[DONE]');
const ERROR_OPEN = Buffer.from('{"error"');

/**
 * One pass over each pushed buffer in plain JavaScript: with a token per read (what fast
 * engines send), calling Buffer.indexOf once per marker per event cost ~50 µs of agent CPU
 * per 20-token stream; a byte loop that stops only at quotes and blank lines costs ~5.
 * Engines terminate events with "\n\n"; CRLF framing is not supported.
 */
export class SseEventFilter {
  /** Usage from the engine's usage chunk, when it sent one. */
  usage: Usage | undefined;
  /** The answer's `id` (`chatcmpl-…`), read from the usage chunk (the one event parsed), for the job's trace. */
  responseId: string | undefined;
  /** The last non-null `finish_reason` seen. */
  finishReason = '';
  /** Events carrying non-empty generated text, for estimating usage the engine did not report. */
  contentEvents = 0;
  sawDone = false;
  private remainder: Buffer | undefined;

  /** @param rename the engine's model name to replace with the catalog model's in every event; none when they are the same */
  constructor(private readonly includeUsage: boolean, private readonly rename?: ModelRename) {}

  /**
   * Returns the complete events in `bytes` to forward; zero-copy unless an event is dropped or
   * a model renamed (then one copy of the pushed bytes, in the Buffer.concat that joins them).
   */
  push(bytes: Buffer): Buffer | undefined {
    const buffer = this.remainder ? Buffer.concat([this.remainder, bytes]) : bytes;
    const length = buffer.length;
    const rename = this.rename;
    /** The parts to forward, when not one span of `buffer`: spans and renamed models. */
    let kept: Buffer[] | undefined;
    /** Where the bytes not yet in `kept` start. */
    let keptFrom = 0;
    let eventStart = 0;
    // `kept` and `keptFrom` as the current event began: a dropped or unfinished event undoes its renames.
    let eventKept = 0;
    let eventKeptFrom = 0;
    let hasContent = false;
    let usageAt = -1;
    let emptyChoices = false;
    for (let index = 0; index < length; index++) {
      const byte = buffer[index];
      if (byte === QUOTE) {
        const key = buffer[index + 1];
        let value = -1;
        if (key === 0x63 /* c */ && (value = valueAfter(buffer, index + 1, CONTENT_KEY)) !== -1) {
          if (buffer[value] === QUOTE && buffer[value + 1] !== QUOTE) hasContent = true;
        } else if (key === 0x74 /* t */ && (value = valueAfter(buffer, index + 1, TEXT_KEY)) !== -1) {
          if (buffer[value] === QUOTE && buffer[value + 1] !== QUOTE) hasContent = true;
        } else if (key === 0x75 /* u */ && (value = valueAfter(buffer, index + 1, USAGE_KEY)) !== -1) {
          if (buffer[value] === OPEN_BRACE) usageAt = value;
        } else if (key === 0x63 /* c */ && (value = valueAfter(buffer, index + 1, CHOICES_KEY)) !== -1) {
          emptyChoices = buffer[value] === OPEN_BRACKET && buffer[value + 1] === 0x5d;
        } else if (key === 0x66 /* f */ && (value = valueAfter(buffer, index + 1, FINISH_KEY)) !== -1 && buffer[value] === QUOTE) {
          const end = buffer.indexOf(QUOTE, value + 1);
          if (end !== -1) this.finishReason = buffer.toString('latin1', value + 1, end);
        } else if (key === 0x6d /* m */ && rename && buffer[index - 1] !== BACKSLASH && (value = valueAfter(buffer, index + 1, MODEL_KEY)) !== -1
          && startsWith(buffer, value, rename.from)) {
          // A key's opening quote never follows a backslash (an escaped quote is text in a string).
          (kept ??= []).push(buffer.subarray(keptFrom, value), rename.to);
          keptFrom = value + rename.from.length;
          value = keptFrom;
        }
        if (value > index) index = value - 1;
      } else if (byte === NEWLINE && buffer[index + 1] === NEWLINE) {
        const eventEnd = index + 2;
        if (!this.keep(buffer, eventStart, eventEnd, usageAt, emptyChoices)) {
          if (kept) kept.length = eventKept;
          keptFrom = eventKeptFrom;
          if (eventStart > keptFrom) (kept ??= []).push(buffer.subarray(keptFrom, eventStart));
          keptFrom = eventEnd;
        }
        if (hasContent) this.contentEvents += 1;
        hasContent = false;
        usageAt = -1;
        emptyChoices = false;
        eventStart = eventEnd;
        eventKept = kept ? kept.length : 0;
        eventKeptFrom = keptFrom;
        index = eventEnd - 1;
      }
    }
    // The unfinished event is scanned again, whole, with the next push: its renames are undone here.
    if (kept) kept.length = eventKept;
    keptFrom = eventKeptFrom;
    this.remainder = eventStart < length ? buffer.subarray(eventStart) : undefined;
    if (eventStart > keptFrom) {
      if (!kept) return keptFrom === 0 && eventStart === length ? buffer : buffer.subarray(keptFrom, eventStart);
      kept.push(buffer.subarray(keptFrom, eventStart));
    }
    if (!kept || kept.length === 0) return undefined;
    return kept.length === 1 ? kept[0] : Buffer.concat(kept);
  }

  /** Handles a last event the engine did not terminate with a blank line. */
  end(): Buffer | undefined {
    const rest = this.remainder;
    this.remainder = undefined;
    if (!rest || rest.toString('utf8').trim() === '') return undefined;
    return this.push(Buffer.concat([rest, Buffer.from('\n\n')]));
  }

  private keep(buffer: Buffer, start: number, end: number, usageAt: number, emptyChoices: boolean): boolean {
    const payload = payloadStart(buffer, start, end);
    if (payload !== -1 && buffer[payload] === OPEN_BRACKET && startsWith(buffer, payload, DONE)) {
      this.sawDone = true;
      return false;
    }
    if (payload !== -1 && buffer[payload] === OPEN_BRACE && startsWith(buffer, payload, ERROR_OPEN)) {
      throw new EngineFailure('engine_error', 'engine reported an error mid-stream', { engineBody: dataOf(buffer.subarray(start, end)) });
    }
    if (usageAt === -1) return true;
    const parsed = parseUsageEvent(buffer.subarray(start, end));
    if (parsed?.usage) {
      this.usage = parsed.usage;
      this.responseId = parsed.id;
    }
    return !emptyChoices || this.includeUsage;
  }
}

/** Where `"key":` (already past its opening quote at `at`) has its value, after an optional space; -1 if `key` is not there. */
function valueAfter(buffer: Buffer, at: number, key: Buffer): number {
  const keyLength = key.length;
  if (at + keyLength > buffer.length) return -1;
  for (let offset = 0; offset < keyLength; offset++) if (buffer[at + offset] !== key[offset]) return -1;
  const value = at + keyLength;
  return buffer[value] === SPACE ? value + 1 : value;
}

/** The first byte of a `data:` line's payload, or -1 for other lines (comments, `event:`). */
function payloadStart(buffer: Buffer, start: number, end: number): number {
  if (end - start < DATA.length || !startsWith(buffer, start, DATA)) return -1;
  const payload = start + DATA.length;
  return buffer[payload] === SPACE ? payload + 1 : payload;
}

function startsWith(buffer: Buffer, at: number, prefix: Buffer): boolean {
  if (at + prefix.length > buffer.length) return false;
  for (let offset = 0; offset < prefix.length; offset++) if (buffer[at + offset] !== prefix[offset]) return false;
  return true;
}

function parseUsageEvent(event: Buffer): { usage: Usage | undefined; id: string | undefined } | undefined {
  try {
    const parsed = parseJsonText(dataOf(event)) as { usage?: unknown; id?: unknown } | null;
    return { usage: usageFromOpenAi(parsed?.usage), id: typeof parsed?.id === 'string' ? parsed.id : undefined };
  } catch {
    return undefined;
  }
}

/** The payload of a single-line `data:` event. */
function dataOf(event: Buffer): Buffer {
  const colon = event.indexOf(COLON);
  return Buffer.from(event.toString('utf8', colon + 1).trim());
}
