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
  return parsed as Record<string, unknown>;
}

/** A percent-encoded path segment, decoded; 400 naming `param` when the encoding is broken. */
export function decodePathSegment(segment: string, param: string): string {
  try {
    return decodeURIComponent(segment);
  } catch (error) {
    throw new AppError('invalid_request', `the ${param} in the path is not valid percent-encoding`, { param, cause: error });
  }
}
