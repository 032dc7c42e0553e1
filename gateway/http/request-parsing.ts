import { refuseNulBytes } from '../../control-plane/database/nul-bytes';
import { AppError } from '../../control-plane/errors/app-error';
import { MAX_JSON_DEPTH, nestsDeeperThan } from './json-nesting';

/** A JSON request body that must be an object: 400 `invalid_json` when it does not parse, `invalid_request` when it is not an object. */
export function parseJsonObject(raw: Buffer): Record<string, unknown> {
  const parsed = parseJson(raw);
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new AppError('invalid_request', 'request body must be a JSON object');
  return parsed as Record<string, unknown>;
}

/** JSON text to a value; over-deep nesting is refused while scanning, before anything is built. */
export function parseJson(raw: Buffer): unknown {
  if (nestsDeeperThan(raw, MAX_JSON_DEPTH)) {
    throw new AppError('invalid_request', `request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`);
  }
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (error) {
    throw new AppError('invalid_json', `request body is not valid JSON: ${(error as Error).message}`, { cause: error });
  }
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
