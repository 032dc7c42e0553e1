import { refuseNulBytes } from '../../control-plane/database/nul-bytes';
import { AppError } from '../../control-plane/errors/app-error';

/** A JSON request body that must be an object: 400 `invalid_json` when it does not parse, `invalid_request` when it is not an object. */
export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (error) {
    throw new AppError('invalid_json', `request body is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AppError('invalid_request', 'request body must be a JSON object');
  if (nestingDepth(raw) > MAX_JSON_DEPTH) {
    throw new AppError('invalid_request', `request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
  }
  return parsed as Record<string, unknown>;
}

/**
 * JSON.parse builds a body nested thousands of levels deep, but JSON.stringify and recursive
 * readers (an error message quoting a field, the shared endpoint's rewritten body, an engine)
 * overflow the stack on it: a fuzzed `"stop": [[[[…]]]]` was a 500. No API field nests anywhere
 * near this deep.
 */
export const MAX_JSON_DEPTH = 128;

/** The deepest nesting of arrays and objects in JSON text (brackets inside strings do not count). */
function nestingDepth(raw: Buffer): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let index = 0; index < raw.length; index++) {
    const byte = raw[index];
    if (inString) {
      if (byte === 0x5c) index++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) {
      inString = true;
    } else if (byte === 0x7b || byte === 0x5b) {
      deepest = Math.max(deepest, ++depth);
    } else if (byte === 0x7d || byte === 0x5d) {
      depth--;
    }
  }
  return deepest;
}

/** A percent-encoded path segment, decoded; 400 naming `param` when the encoding is broken or it holds a NUL (`%00`). */
export function decodePathSegment(segment: string, param: string): string {
  let decoded: string;
  try {
    decoded = decodeURIComponent(segment);
  } catch (error) {
    throw new AppError('invalid_request', `the ${param} in the path is not valid percent-encoding`, { param, cause: error });
  }
  refuseNulBytes(decoded, param);
  return decoded;
}
