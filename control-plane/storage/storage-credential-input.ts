import { AppError } from '../errors/app-error';
import { bucketNameProblem, keyPrefixProblem, normalizeKeyPrefix } from './object-names';
import { quoteValue } from '../errors/quote-value';

/** What a user submits to register a bucket; untrusted, so every field is checked here. */
export interface StorageCredentialInput {
  name: string;
  /** Only `s3` (any S3-compatible store). @default s3 */
  provider?: string;
  /** http(s) URL of an S3-compatible endpoint; omit for AWS S3. */
  endpoint?: string | null;
  region: string;
  bucket: string;
  /** Confines our objects to part of the bucket (`outputs/`). @default '' */
  keyPrefix?: string | null;
  accessKeyId: string;
  secretAccessKey: string;
}

export type ValidStorageCredentialInput = Required<Omit<StorageCredentialInput, 'provider'>> & {
  provider: 's3';
  endpoint: string | null;
  keyPrefix: string;
};

// Not only AWS's `us-east-1`: S3-compatible stores use `auto` (R2), `fr-par`, `nyc3`, `garage`.
const REGION = /^[a-z0-9]+(-[a-z0-9]+)*$/;
const TOKEN = /^[\x21-\x7e]+$/;
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

export function validateStorageCredentialInput(input: StorageCredentialInput): ValidStorageCredentialInput {
  const name = text(input.name, 'name').trim();
  if (!name || name.length > 100 || CONTROL_CHARACTERS.test(name)) fail('name', 'name must be 1 to 100 characters without control characters');
  const provider = input.provider ?? 's3';
  if (provider !== 's3') fail('provider', `provider must be 's3' (any S3-compatible store), got ${quoteValue(provider)}`);
  const region = text(input.region, 'region').trim();
  if (region.length > 32 || !REGION.test(region)) fail('region', `region must be like 'us-east-1' (lowercase letters, digits and single hyphens), got ${quoteValue(region)}`);
  const bucket = text(input.bucket, 'bucket').trim();
  const bucketProblem = bucketNameProblem(bucket);
  if (bucketProblem) fail('bucket', `bucket ${quoteValue(bucket)} ${bucketProblem}`);
  return {
    name, provider, region, bucket,
    endpoint: endpoint(input.endpoint),
    keyPrefix: keyPrefix(input.keyPrefix),
    accessKeyId: token(input.accessKeyId, 'accessKeyId', 128),
    secretAccessKey: token(input.secretAccessKey, 'secretAccessKey', 256),
  };
}

function endpoint(value: unknown): string | null {
  if (value === undefined || value === null || value === '') return null;
  const raw = text(value, 'endpoint').trim();
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return fail('endpoint', `endpoint must be an http(s) URL such as https://s3.example.com, got ${quoteValue(raw)}`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') fail('endpoint', `endpoint must use http or https, got ${url.protocol}`);
  if (url.username || url.password) fail('endpoint', 'endpoint must not contain credentials; use accessKeyId and secretAccessKey');
  if (url.search || url.hash) fail('endpoint', 'endpoint must not have a query or fragment');
  return url.toString().replace(/\/+$/, '');
}

/** '' or a valid key prefix ending in exactly one '/' (`outputs` becomes `outputs/`). */
function keyPrefix(value: unknown): string {
  if (value === undefined || value === null) return '';
  const raw = text(value, 'keyPrefix');
  const problem = keyPrefixProblem(raw);
  if (problem) fail('keyPrefix', `keyPrefix ${quoteValue(raw)} ${problem}`);
  return normalizeKeyPrefix(raw);
}

function token(value: unknown, field: string, maxLength: number): string {
  const raw = text(value, field);
  if (raw.length > maxLength || !TOKEN.test(raw)) fail(field, `${field} must be 1 to ${maxLength} printable characters without spaces`);
  return raw;
}

function text(value: unknown, field: string): string {
  if (typeof value !== 'string') fail(field, `${field} is required and must be a string`);
  return value;
}

function fail(field: string, message: string): never {
  throw new AppError('invalid_request', message, { param: field });
}
