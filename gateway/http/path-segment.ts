import { AppError, refuseNulBytes } from '../../control-plane/api/errors';

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
