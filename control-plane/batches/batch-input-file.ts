import { parseJsonText } from '../../common/json-nesting';
import { findLoneSurrogate, findNulByte } from '../database/nul-bytes';
import { quoteValue } from '../errors/quote-value';
import type { BatchEndpoint, BatchError } from './batch.entities';
import type { LineCheck } from './batch-line-handler';

/** One request of an input file that passed the file's rules; its body may still be one the endpoint refuses (`check`). */
export interface InputLine {
  /** 0-based line of the file (blank lines are skipped but counted). */
  readonly index: number;
  readonly customId: string;
  /** The body as JSON text, sent to the engine as it is. */
  readonly body: string;
  readonly check: LineCheck;
}

export interface InputFileRules {
  readonly endpoint: BatchEndpoint;
  /** The deployment's model: a line's `body.model`, when it names one, must be this. */
  readonly modelId: string;
  readonly maxLines: number;
  readonly maxLineBytes: number;
  /** The live endpoint's checks of a body (BatchLineHandler.check). */
  readonly check: (body: Buffer) => LineCheck;
}

export interface InputFileResult {
  readonly lines: InputLine[];
  /** Why the file as a whole is refused (the batch then fails, nothing runs); empty when it is valid. */
  readonly errors: BatchError[];
}

/** A file with more problems than this lists the first ones and says how many were left out. */
export const MAX_LISTED_ERRORS = 100;
const MAX_CUSTOM_ID_CHARACTERS = 512;
/** Lines checked between two yields to the event loop: a 100 MB file must not stall the server. */
const LINES_PER_TURN = 500;

/**
 * Reads a batch's JSONL input file against OpenAI's rules: each non-blank line a JSON object
 * `{custom_id, method, url, body}`, `custom_id` a string unique in the file, `method` POST,
 * `url` the batch's endpoint, `body` an object whose `model` (optional, as on the live
 * endpoint) is the deployment's, no line over the size limit, no more lines than the limit.
 * Any of these failing fails the whole file, its errors naming lines from 1. A body that
 * passes them but that the endpoint itself refuses (a negative `max_tokens`) is not a file
 * error: that line alone is answered with the endpoint's 400, in the error file.
 */
export async function readInputFile(data: Buffer, rules: InputFileRules): Promise<InputFileResult> {
  const lines: InputLine[] = [];
  const errors: BatchError[] = [];
  let errorCount = 0;
  const refuse = (line: number | null, code: string, message: string, param: string | null = null) => {
    errorCount++;
    if (errors.length < MAX_LISTED_ERRORS) errors.push({ code, message, param, line });
  };
  const seen = new Set<string>();
  let requests = 0;
  let start = 0;
  for (let index = 0; start < data.length; index++) {
    if (index > 0 && index % LINES_PER_TURN === 0) await new Promise((resolve) => setImmediate(resolve));
    let end = data.indexOf(0x0a, start);
    if (end === -1) end = data.length;
    const raw = data.subarray(start, end > start && data[end - 1] === 0x0d ? end - 1 : end);
    start = end + 1;
    const number = index + 1;
    if (raw.length > rules.maxLineBytes) {
      if (++requests > rules.maxLines) break;
      refuse(number, 'line_too_large', `line ${number} is ${raw.length} bytes; a request may be at most ${rules.maxLineBytes} bytes`);
      continue;
    }
    const text = raw.toString('utf8');
    if (text.trim() === '') continue;
    if (++requests > rules.maxLines) break;
    const line = parseLine(raw);
    if (typeof line === 'string') {
      refuse(number, 'invalid_json_line', `line ${number} is not a JSON object: ${line}`);
      continue;
    }
    const customId = line.custom_id;
    if (typeof customId !== 'string' || customId.length === 0) {
      refuse(number, 'missing_custom_id', `line ${number} needs a custom_id: a non-empty string naming the request in the output`, 'custom_id');
      continue;
    }
    if (customId.length > MAX_CUSTOM_ID_CHARACTERS || findNulByte(customId) || findLoneSurrogate(customId)) {
      refuse(number, 'invalid_custom_id', `line ${number}: custom_id must be at most ${MAX_CUSTOM_ID_CHARACTERS} characters, without NUL characters or unpaired surrogates`, 'custom_id');
      continue;
    }
    if (seen.has(customId)) {
      refuse(number, 'duplicate_custom_id', `line ${number}: custom_id ${quoteValue(customId)} is used by an earlier line; each request needs its own`, 'custom_id');
      continue;
    }
    seen.add(customId);
    if (line.method !== 'POST') {
      refuse(number, 'invalid_method', `line ${number}: method must be "POST", got ${quoteValue(line.method ?? null)}`, 'method');
      continue;
    }
    if (line.url !== rules.endpoint) {
      refuse(number, 'invalid_url', `line ${number}: url must be the batch's endpoint "${rules.endpoint}", got ${quoteValue(line.url ?? null)}`, 'url');
      continue;
    }
    const body = line.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      refuse(number, 'invalid_body', `line ${number}: body must be a JSON object, the request's body`, 'body');
      continue;
    }
    const model = (body as Record<string, unknown>).model;
    if (typeof model === 'string' && model !== rules.modelId) {
      refuse(number, 'mismatched_model', `line ${number}: body.model ${quoteValue(model)} is not this deployment's model "${rules.modelId}" (the field may be omitted)`, 'body.model');
      continue;
    }
    if (errorCount > 0) continue;
    const json = JSON.stringify(body);
    lines.push({ index, customId, body: json, check: rules.check(Buffer.from(json)) });
  }
  if (requests > rules.maxLines) {
    refuse(null, 'too_many_lines', `the file has more than ${rules.maxLines} requests, the most one batch takes; split it into several batches`);
  }
  if (requests === 0) refuse(null, 'empty_file', 'the input file holds no requests: one JSON object per line');
  if (errorCount > errors.length) {
    errors.push({ code: 'too_many_errors', message: `${errorCount - errors.length} more problems were found and are not listed`, param: null, line: null });
  }
  return { lines: errorCount > 0 ? [] : lines, errors };
}

/** The line as an object, or why it is not one. */
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
