import { AppError } from '../errors/app-error';
import { JsonNestingError, parseJsonText } from '../../common/json-nesting';

/*
 * A client's JSON body as the API reads it, wherever it arrives (a live request, a batch line,
 * a GraphQL POST): the nesting scan first, then the value, or the AppError its refusal is.
 */

/** A JSON request body that must be an object: 400 `invalid_json` when it does not parse, `invalid_request` when it is not an object. */
export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  // A large body that cannot be an object is refused unparsed: a 4 MiB array of zeros cost ~80 ms
  // of JSON.parse (the event loop blocked for everyone) only to be refused after it. Small ones
  // are parsed, so a malformed one still says what JSON.parse found.
  const start = firstNonSpace(raw);
  if (raw.length - start > UNPARSED_REFUSAL_BYTES && raw[start] !== 0x7b) throw new AppError('invalid_request', 'request body must be a JSON object');
  const parsed = parseJson(raw);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AppError('invalid_request', 'request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

const UNPARSED_REFUSAL_BYTES = 64 * 1024;

/** Index of the first byte that is not JSON white space (the length when there is none). */
function firstNonSpace(raw: Buffer): number {
  let index = 0;
  while (index < raw.length && (raw[index] === 0x20 || raw[index] === 0x0a || raw[index] === 0x0d || raw[index] === 0x09)) index++;
  return index;
}

/** JSON text to a value; over-deep nesting and more containers than any request has are refused while scanning, before anything is built. */
export function parseJson(raw: Buffer): unknown {
  try {
    return parseJsonText(raw);
  } catch (error) {
    if (error instanceof JsonNestingError) throw new AppError('invalid_request', `request body is refused unparsed: ${error.message}`);
    throw new AppError('invalid_json', `request body is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
}
