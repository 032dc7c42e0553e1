import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';

/** S3's own limit on a key; the local store keeps it so keys move between stores unchanged. */
const MAX_KEY_BYTES = 1024;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

/**
 * Why `key` is not a safe object key, or null. Keys become file paths in the local store and
 * URL paths in links, so anything that could climb out of the bucket directory or map two
 * keys to one file (`..`, a leading `/`, `\`, empty or `.` segments) is refused everywhere.
 */
export function objectKeyProblem(key: string): string | null {
  if (key.length === 0) return 'must not be empty';
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) return `must be at most ${MAX_KEY_BYTES} bytes`;
  if (key.includes('..')) return 'must not contain ".."';
  if (key.startsWith('/')) return 'must not start with "/"';
  if (key.includes('\\')) return 'must not contain backslashes';
  if (CONTROL_CHARACTERS.test(key)) return 'must not contain control characters';
  if (key.split('/').some((segment) => segment === '' || segment === '.')) return 'must not contain empty or "." path segments';
  return null;
}

export function assertObjectKey(key: string, param = 'key'): void {
  const problem = objectKeyProblem(key);
  if (problem) throw new AppError('invalid_request', `object key ${quoteValue(key)} ${problem}`, { param });
}

/** Why `value` cannot prefix keys, or null. A trailing '/' is allowed (and added when missing). */
export function keyPrefixProblem(value: string): string | null {
  const trimmed = value.replace(/\/+$/, '');
  if (value !== '' && trimmed === '') return 'must name at least one path segment';
  if (Buffer.byteLength(trimmed) > 512) return 'must be at most 512 bytes';
  return trimmed === '' ? null : objectKeyProblem(trimmed);
}

/** '' or the prefix ending in exactly one '/': `outputs` and `outputs/` both mean keys under `outputs/`. */
export function normalizeKeyPrefix(value: string): string {
  const trimmed = value.replace(/\/+$/, '');
  return trimmed === '' ? '' : `${trimmed}/`;
}

const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const IP_ADDRESS = /^\d{1,3}(\.\d{1,3}){3}$/;
const RESERVED_PREFIXES = ['xn--', 'sthree-', 'amzn-s3-demo-'];
const RESERVED_SUFFIXES = ['-s3alias', '--ol-s3', '.mrap', '--x-s3', '--table-s3'];

/** Why `name` breaks S3's general-purpose bucket naming rules, or null. */
export function bucketNameProblem(name: string): string | null {
  if (!BUCKET_NAME.test(name)) {
    return 'must be 3-63 characters of lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit';
  }
  if (name.includes('..') || name.includes('.-') || name.includes('-.')) return 'must not contain "..", ".-" or "-."';
  if (IP_ADDRESS.test(name)) return 'must not be formatted as an IP address';
  const prefix = RESERVED_PREFIXES.find((reserved) => name.startsWith(reserved));
  if (prefix) return `must not start with the reserved prefix "${prefix}"`;
  const suffix = RESERVED_SUFFIXES.find((reserved) => name.endsWith(reserved));
  if (suffix) return `must not end with the reserved suffix "${suffix}"`;
  return null;
}
