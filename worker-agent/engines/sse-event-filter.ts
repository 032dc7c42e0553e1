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
const EVENT_END = Buffer.from('\n\n');
const DONE_PREFIXES = ['data: [DONE]', 'data:[DONE]'].map((prefix) => Buffer.from(prefix));
const ERROR_PREFIXES = ['data: {"error"', 'data:{"error"'].map((prefix) => Buffer.from(prefix));
/** Marker spellings of one JSON style: compact (vLLM, SGLang, llama.cpp, TGI) or Python's default spacing. */
interface Markers {
  readonly usage: Buffer;
  readonly emptyChoices: Buffer;
  readonly finish: Buffer;
  /** Chat streams carry `content`, completion streams `text`. */
  readonly content: readonly Buffer[];
}

const markersOf = (separator: string): Markers => ({
  usage: Buffer.from(`"usage":${separator}{`),
  emptyChoices: Buffer.from(`"choices":${separator}[]`),
  finish: Buffer.from(`"finish_reason":${separator}"`),
  content: [Buffer.from(`"content":${separator}"`), Buffer.from(`"text":${separator}"`)],
});
const COMPACT = markersOf('');
const SPACED = markersOf(' ');
const SPACED_HINT = Buffer.from('": ');
const QUOTE = 0x22;

/**
 * Searches run once per pushed buffer (which holds many events when the engine is fast), not
 * once per event per marker: the per-event version spent a fifth of the agent's CPU in indexOf.
 */
export class SseEventFilter {
  /** Usage from the engine's usage chunk, when it sent one. */
  usage: Usage | undefined;
  /** The last non-null `finish_reason` seen. */
  finishReason = '';
  /** Events carrying non-empty generated text, for estimating usage the engine did not report. */
  contentEvents = 0;
  sawDone = false;
  private remainder: Buffer | undefined;
  /** Learned from the first complete event, so each marker is searched in one spelling only. */
  private markers: Markers | undefined;
  private contentMarker: Buffer | undefined;

  constructor(private readonly includeUsage: boolean) {}

  /** Returns the complete events in `bytes` to forward; zero-copy unless an event is dropped. */
  push(bytes: Buffer): Buffer | undefined {
    const buffer = this.remainder ? Buffer.concat([this.remainder, bytes]) : bytes;
    const kept: Buffer[] = [];
    let start = 0;
    let keptFrom = 0;
    let end = buffer.indexOf(EVENT_END);
    if (end === -1) {
      this.remainder = buffer;
      return undefined;
    }
    const markers = (this.markers ??= buffer.subarray(0, end).indexOf(SPACED_HINT) === -1 ? COMPACT : SPACED);
    let usageAt = buffer.indexOf(markers.usage);
    for (; end !== -1; end = buffer.indexOf(EVENT_END, start)) {
      const eventEnd = end + EVENT_END.length;
      const hasUsage = usageAt !== -1 && usageAt < eventEnd;
      if (!this.keep(buffer, start, eventEnd, hasUsage)) {
        if (start > keptFrom) kept.push(buffer.subarray(keptFrom, start));
        keptFrom = eventEnd;
      }
      if (hasUsage) usageAt = buffer.indexOf(markers.usage, eventEnd);
      start = eventEnd;
    }
    this.remainder = start < buffer.length ? buffer.subarray(start) : undefined;
    const complete = buffer.subarray(0, start);
    this.peekFinishReason(complete, markers.finish);
    this.contentEvents += this.countContentEvents(complete, markers.content);
    if (start > keptFrom) kept.push(buffer.subarray(keptFrom, start));
    if (kept.length === 0) return undefined;
    return kept.length === 1 ? kept[0] : Buffer.concat(kept);
  }

  /** Handles a last event the engine did not terminate with a blank line. */
  end(): Buffer | undefined {
    const rest = this.remainder;
    this.remainder = undefined;
    if (!rest || rest.toString('utf8').trim() === '') return undefined;
    return this.push(Buffer.concat([rest, EVENT_END]));
  }

  private keep(buffer: Buffer, start: number, end: number, hasUsage: boolean): boolean {
    if (startsWithAny(buffer, start, end, DONE_PREFIXES)) {
      this.sawDone = true;
      return false;
    }
    if (startsWithAny(buffer, start, end, ERROR_PREFIXES)) {
      throw new EngineFailure('engine_error', 'engine reported an error mid-stream', { engineBody: dataOf(buffer.subarray(start, end)) });
    }
    if (!hasUsage) return true;
    const event = buffer.subarray(start, end);
    this.usage = parseUsage(event) ?? this.usage;
    return event.indexOf(this.markers!.emptyChoices) === -1 || this.includeUsage;
  }

  /** The last finish reason in the buffer wins, as it would event by event. */
  private peekFinishReason(events: Buffer, marker: Buffer): void {
    const at = events.lastIndexOf(marker);
    if (at === -1) return;
    const valueStart = at + marker.length;
    const valueEnd = events.indexOf(QUOTE, valueStart);
    if (valueEnd !== -1) this.finishReason = events.toString('utf8', valueStart, valueEnd);
  }

  /** Occurrences of the content marker with a non-empty string value (one per token event). */
  private countContentEvents(events: Buffer, candidates: readonly Buffer[]): number {
    let count = 0;
    for (const marker of this.contentMarker ? [this.contentMarker] : candidates) {
      for (let at = events.indexOf(marker); at !== -1; at = events.indexOf(marker, at + marker.length)) {
        this.contentMarker = marker;
        if (events[at + marker.length] !== QUOTE) count += 1;
      }
      if (this.contentMarker) return count;
    }
    return count;
  }
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

/** Compares bytes in place: no string or slice is built for ordinary token events. */
function startsWithAny(buffer: Buffer, start: number, end: number, prefixes: readonly Buffer[]): boolean {
  for (const prefix of prefixes) {
    if (end - start >= prefix.length && prefix.compare(buffer, start, start + prefix.length) === 0) return true;
  }
  return false;
}
