/**
 * Splits an engine's SSE byte stream into whole events and passes them through as bytes.
 * Events are only peeked with substring checks (no JSON parse per token): the usage chunk is
 * the one event that gets parsed. Engines serialise compactly (vLLM, SGLang, llama.cpp, TGI)
 * but Python's default `json.dumps` spacing is accepted too.
 */
import type { Usage } from '../../proto/worker/v1/index';
import { EngineFailure } from './engine-failure';
import { usageFromOpenAi } from './usage-estimate';

// Engines we target terminate events with "\n\n"; CRLF framing is not supported.
const EVENT_END = '\n\n';
const DONE_PREFIXES = ['data: [DONE]', 'data:[DONE]'].map((prefix) => Buffer.from(prefix));
const ERROR_PREFIXES = ['data: {"error"', 'data:{"error"'].map((prefix) => Buffer.from(prefix));
const USAGE_MARKERS = ['"usage":{', '"usage": {'];
const EMPTY_CHOICES_MARKERS = ['"choices":[]', '"choices": []'];
const FINISH_MARKERS = ['"finish_reason":"', '"finish_reason": "'];
const CONTENT_MARKERS = ['"content":"', '"text":"', '"content": "', '"text": "'];
const QUOTE = 0x22;

export class SseEventFilter {
  /** Usage from the engine's usage chunk, when it sent one. */
  usage: Usage | undefined;
  /** The last non-null `finish_reason` seen. */
  finishReason = '';
  /** Events carrying non-empty generated text, for estimating usage the engine did not report. */
  contentEvents = 0;
  sawDone = false;
  private remainder: Buffer | undefined;

  constructor(private readonly includeUsage: boolean) {}

  /** Returns the complete events in `bytes` to forward; zero-copy unless an event is dropped. */
  push(bytes: Buffer): Buffer | undefined {
    const buffer = this.remainder ? Buffer.concat([this.remainder, bytes]) : bytes;
    const kept: Buffer[] = [];
    let start = 0;
    let keptFrom = 0;
    let end: number;
    while ((end = buffer.indexOf(EVENT_END, start)) !== -1) {
      const eventEnd = end + EVENT_END.length;
      if (!this.keep(buffer.subarray(start, eventEnd))) {
        if (start > keptFrom) kept.push(buffer.subarray(keptFrom, start));
        keptFrom = eventEnd;
      }
      start = eventEnd;
    }
    this.remainder = start < buffer.length ? buffer.subarray(start) : undefined;
    if (start > keptFrom) kept.push(buffer.subarray(keptFrom, start));
    if (kept.length === 0) return undefined;
    return kept.length === 1 ? kept[0] : Buffer.concat(kept);
  }

  /** Handles a last event the engine did not terminate with a blank line. */
  end(): Buffer | undefined {
    const rest = this.remainder;
    this.remainder = undefined;
    if (!rest || rest.toString('utf8').trim() === '') return undefined;
    return this.push(Buffer.concat([rest, Buffer.from(EVENT_END)]));
  }

  private keep(event: Buffer): boolean {
    if (startsWithAny(event, DONE_PREFIXES)) {
      this.sawDone = true;
      return false;
    }
    if (startsWithAny(event, ERROR_PREFIXES)) {
      throw new EngineFailure('engine_error', 'engine reported an error mid-stream', { engineBody: dataOf(event) });
    }
    this.peekFinishReason(event);
    if (indexOfAny(event, USAGE_MARKERS) !== -1) {
      this.usage = parseUsage(event) ?? this.usage;
      if (indexOfAny(event, EMPTY_CHOICES_MARKERS) !== -1) return this.includeUsage;
    }
    if (hasContent(event)) this.contentEvents += 1;
    return true;
  }

  private peekFinishReason(event: Buffer): void {
    for (const marker of FINISH_MARKERS) {
      const at = event.indexOf(marker);
      if (at === -1) continue;
      const valueStart = at + marker.length;
      const valueEnd = event.indexOf(QUOTE, valueStart);
      if (valueEnd !== -1) this.finishReason = event.toString('utf8', valueStart, valueEnd);
      return;
    }
  }
}

function hasContent(event: Buffer): boolean {
  for (const marker of CONTENT_MARKERS) {
    const at = event.indexOf(marker);
    if (at !== -1 && event[at + marker.length] !== QUOTE) return true;
  }
  return false;
}

function parseUsage(event: Buffer): Usage | undefined {
  try {
    return usageFromOpenAi(JSON.parse(dataOf(event).toString('utf8')).usage);
  } catch {
    return undefined;
  }
}

/** The payload of a single-line `data:` event. */
function dataOf(event: Buffer): Buffer {
  const colon = event.indexOf(':');
  return Buffer.from(event.toString('utf8', colon + 1).trim());
}

/** Compares bytes in place: no string is built for the events that are neither. */
function startsWithAny(event: Buffer, prefixes: readonly Buffer[]): boolean {
  return prefixes.some((prefix) => event.length >= prefix.length && prefix.compare(event, 0, prefix.length) === 0);
}

function indexOfAny(event: Buffer, markers: readonly string[]): number {
  for (const marker of markers) {
    const at = event.indexOf(marker);
    if (at !== -1) return at;
  }
  return -1;
}
