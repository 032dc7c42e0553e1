import { parseJsonText } from '../../common/json-nesting';
import { findLoneSurrogate, findNulByte } from '../database/nul-bytes';
import { quoteValue } from '../errors/quote-value';
import type { BatchEndpoint, BatchError } from './batch.entities';
import type { LineCheck, LineResponse } from './batch-line-handler';
import { JsonlSplitter, type JsonlLine } from './jsonl-lines';
import { lastMemberSpan } from './json-member-span';
import type { WorkSlices } from './work-slices';

/**
 * The requests of an input file that passed the file's rules, one column per field (what the
 * store inserts; a million lines are a few arrays, not a million objects). A request's body is
 * not kept: only where it lies in the file, which the runner reads when it runs the line.
 */
export class InputLines {
  /** 0-based lines of the file (blank lines are skipped but counted). */
  readonly indexes: number[] = [];
  readonly customIds: string[] = [];
  /** Where each body (the `body` member's JSON text) starts in the file, in bytes. */
  readonly bodyOffsets: number[] = [];
  readonly bodyLengths: number[] = [];
  /** Bodies the endpoint itself refuses (a negative `max_tokens`), by line: answered with its 4xx, never run. */
  readonly refused = new Map<number, { customId: string; response: LineResponse }>();

  get count(): number {
    return this.indexes.length;
  }

  add(index: number, customId: string, bodyOffset: number, bodyLength: number, check: LineCheck): void {
    this.indexes.push(index);
    this.customIds.push(customId);
    this.bodyOffsets.push(bodyOffset);
    this.bodyLengths.push(bodyLength);
    if (!check.ok) this.refused.set(index, { customId, response: check.response });
  }
}

export interface InputFileRules {
  readonly endpoint: BatchEndpoint;
  /** The deployment's model: a line's `body.model`, when it names one, must be this or one of `adapterNames`. */
  readonly modelId: string;
  /** The names of the workspace's LoRA adapters attached to the deployment (docs/adapters.md#addressing); none on embeddings. */
  readonly adapterNames?: ReadonlySet<string>;
  readonly maxLines: number;
  readonly maxLineBytes: number;
  /** The live endpoint's checks of a body (BatchLineHandler.check). */
  readonly check: (body: Buffer) => LineCheck;
}

export interface InputFileResult {
  readonly lines: InputLines;
  /** Why the file as a whole is refused (the batch then fails, nothing runs); empty when it is valid. */
  readonly errors: BatchError[];
}

/** A file with more problems than this lists the first ones and says how many were left out. */
export const MAX_LISTED_ERRORS = 100;
const MAX_CUSTOM_ID_CHARACTERS = 512;

/**
 * Reads a batch's JSONL input file against OpenAI's rules: each non-blank line a JSON object
 * `{custom_id, method, url, body}`, `custom_id` a string unique in the file, `method` POST,
 * `url` the batch's endpoint, `body` an object whose `model` (optional, as on the live
 * endpoint) is the deployment's or an adapter attached to it, no line over the size limit, no more lines than the limit.
 * Any of these failing fails the whole file, its errors naming lines from 1. A body that
 * passes them but that the endpoint itself refuses (a negative `max_tokens`) is not a file
 * error: that line alone is answered with the endpoint's 400, in the error file.
 *
 * The file is read as a stream (one line held at a time), each line scanned for nesting before
 * it is parsed, and the work runs in `slices`: the event loop gets a turn whenever a slice has
 * used its time budget, however large or hostile the lines.
 */
export async function readInputFile(chunks: AsyncIterable<Buffer>, rules: InputFileRules, slices: WorkSlices): Promise<InputFileResult> {
  const reader = new InputFileReader(rules);
  const splitter = new JsonlSplitter(rules.maxLineBytes);
  for await (const chunk of chunks) {
    for (const line of splitter.push(chunk)) {
      if (!reader.read(line)) return reader.result();
      await slices.pause();
    }
  }
  for (const line of splitter.end()) reader.read(line);
  return reader.result();
}

/** The rules, line by line. */
class InputFileReader {
  private readonly lines = new InputLines();
  private readonly errors: BatchError[] = [];
  private errorCount = 0;
  private readonly seen = new Set<string>();
  private requests = 0;

  constructor(private readonly rules: InputFileRules) {}

  /** Checks one line; false once the file has more requests than the limit (nothing after matters). */
  read(line: JsonlLine): boolean {
    const number = line.index + 1;
    if (!line.raw) {
      if (++this.requests > this.rules.maxLines) return false;
      this.refuse(number, 'line_too_large', `line ${number} is ${line.length} bytes; a request may be at most ${this.rules.maxLineBytes} bytes`);
      return true;
    }
    const raw = line.raw;
    if (isBlank(raw)) return true;
    if (++this.requests > this.rules.maxLines) return false;
    const parsed = parseLine(raw);
    if (typeof parsed === 'string') {
      this.refuse(number, 'invalid_json_line', `line ${number} is not a JSON object: ${parsed}`);
      return true;
    }
    const customId = parsed.custom_id;
    if (typeof customId !== 'string' || customId.length === 0) {
      this.refuse(number, 'missing_custom_id', `line ${number} needs a custom_id: a non-empty string naming the request in the output`, 'custom_id');
      return true;
    }
    if (customId.length > MAX_CUSTOM_ID_CHARACTERS || findNulByte(customId) || findLoneSurrogate(customId)) {
      this.refuse(number, 'invalid_custom_id', `line ${number}: custom_id must be at most ${MAX_CUSTOM_ID_CHARACTERS} characters, without NUL characters or unpaired surrogates`, 'custom_id');
      return true;
    }
    if (this.seen.has(customId)) {
      this.refuse(number, 'duplicate_custom_id', `line ${number}: custom_id ${quoteValue(customId)} is used by an earlier line; each request needs its own`, 'custom_id');
      return true;
    }
    this.seen.add(customId);
    if (parsed.method !== 'POST') {
      this.refuse(number, 'invalid_method', `line ${number}: method must be "POST", got ${quoteValue(parsed.method ?? null)}`, 'method');
      return true;
    }
    if (parsed.url !== this.rules.endpoint) {
      this.refuse(number, 'invalid_url', `line ${number}: url must be the batch's endpoint "${this.rules.endpoint}", got ${quoteValue(parsed.url ?? null)}`, 'url');
      return true;
    }
    const body = parsed.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      this.refuse(number, 'invalid_body', `line ${number}: body must be a JSON object, the request's body`, 'body');
      return true;
    }
    const model = (body as Record<string, unknown>).model;
    if (typeof model === 'string' && model !== this.rules.modelId && !this.rules.adapterNames?.has(model)) {
      this.refuse(number, 'mismatched_model', `line ${number}: body.model ${quoteValue(model)} is not this deployment's model "${this.rules.modelId}" (the field may be omitted)`, 'body.model');
      return true;
    }
    if (this.errorCount > 0) return true;
    // The body's own bytes, as a live request's are sent: JSON.parse took the last `body`, so does the span.
    const span = lastMemberSpan(raw, 'body')!;
    this.lines.add(line.index, customId, line.offset + span.start, span.end - span.start, this.rules.check(raw.subarray(span.start, span.end)));
    return true;
  }

  result(): InputFileResult {
    if (this.requests > this.rules.maxLines) {
      this.refuse(null, 'too_many_lines', `the file has more than ${this.rules.maxLines} requests, the most one batch takes; split it into several batches`);
    }
    if (this.requests === 0) this.refuse(null, 'empty_file', 'the input file holds no requests: one JSON object per line');
    if (this.errorCount > this.errors.length) {
      this.errors.push({ code: 'too_many_errors', message: `${this.errorCount - this.errors.length} more problems were found and are not listed`, param: null, line: null });
    }
    return { lines: this.errorCount > 0 ? new InputLines() : this.lines, errors: this.errors };
  }

  private refuse(line: number | null, code: string, message: string, param: string | null = null): void {
    this.errorCount++;
    if (this.errors.length < MAX_LISTED_ERRORS) this.errors.push({ code, message, param, line });
  }
}

/** Only white space (as `trim` sees it): a blank line, skipped. */
function isBlank(raw: Buffer): boolean {
  for (const byte of raw) {
    if (byte === 0x20 || byte === 0x09 || byte === 0x0b || byte === 0x0c || byte === 0x0d) continue;
    // Past ASCII, Unicode's spaces (a no-break space) are blank to `trim` too.
    return byte >= 0x80 && raw.toString('utf8').trim() === '';
  }
  return true;
}

/** The line as an object, or why it is not one (the nesting scan's refusal included). */
function parseLine(raw: Buffer): Record<string, unknown> | string {
  let parsed: unknown;
  try {
    parsed = parseJsonText(raw);
  } catch (error) {
    return (error as Error).message;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return `it is ${Array.isArray(parsed) ? 'an array' : parsed === null ? 'null' : `a ${typeof parsed}`}`;
  return parsed as Record<string, unknown>;
}
