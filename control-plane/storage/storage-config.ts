import { z } from 'zod';
import { boolField, ConfigError, intField, loadEnv } from '../config/env-fields';
import { bucketNameProblem, keyPrefixProblem, normalizeKeyPrefix } from './object-names';
import { MAX_PRESIGN_SECONDS } from './s3-object-store';

const bucketName = z.string().refine((name) => bucketNameProblem(name) === null, {
  message: 'must be an S3 bucket name (3-63 lowercase letters, digits, dots and hyphens)',
});

const shape = {
  /** Where managed outputs go: `local` files under `<dataDir>/objects`, or the `s3` bucket below. @default local */
  storageProvider: z.enum(['local', 's3']).default('local'),
  /** The request record's `output_bucket` (docs/api-contract.md#request-records) of managed outputs (also the directory name of the local store). @default outputs */
  outputBucket: bucketName.default('outputs'),
  /** S3-compatible endpoint of the managed bucket; unset means AWS S3. */
  s3Endpoint: z.string().url().optional(),
  /** @default us-east-1 */
  s3Region: z.string().default('us-east-1'),
  /** Required when storageProvider is `s3`. */
  s3AccessKeyId: z.string().optional(),
  /** Required when storageProvider is `s3`. */
  s3SecretAccessKey: z.string().optional(),
  /** Path-style requests (MinIO, s3rver and most non-AWS stores need them). @default false */
  s3ForcePathStyle: boolField().default(false),
  /** Prefix of every managed key in the S3 bucket, e.g. `outputs/`. @default '' */
  s3KeyPrefix: z.string().default('')
    .refine((prefix) => keyPrefixProblem(prefix) === null, { message: 'must be a key prefix such as outputs/ (no "..", leading "/" or backslashes)' })
    .transform(normalizeKeyPrefix),
  /** HMAC key of local-store links, 64 hex characters or base64 of 32 bytes; shared by every instance. Unset: `<dataDir>/storage-signing.key`, created once. */
  storageSigningKey: z.string().optional(),
  /** Lifetime of links to managed outputs (docs/api-contract.md: about 1 hour). @default 3600 */
  outputUrlTtlSeconds: intField(1, MAX_PRESIGN_SECONDS).default(3600),
  /** Lifetime of links to outputs in a customer bucket (docs/api-contract.md: about 7 days; SigV4's maximum). @default 604800 */
  customerOutputUrlTtlSeconds: intField(1, MAX_PRESIGN_SECONDS).default(MAX_PRESIGN_SECONDS),
  /**
   * Let customers' bucket endpoints be private, loopback or link-local addresses (a MinIO in
   * the operator's own network, tests). Off: users could make the platform probe its network. @default false
   */
  allowPrivateEndpoints: boolField().default(false),
  /** Largest file an agent may PUT through a local-store link. @default 536870912 (512 MiB) */
  maxUploadBytes: intField(1).default(512 * 1024 * 1024),
};

const names = {
  storageProvider: 'STORAGE_PROVIDER', outputBucket: 'OUTPUT_BUCKET', s3Endpoint: 'S3_ENDPOINT', s3Region: 'S3_REGION',
  s3AccessKeyId: 'S3_ACCESS_KEY_ID', s3SecretAccessKey: 'S3_SECRET_ACCESS_KEY', s3ForcePathStyle: 'S3_FORCE_PATH_STYLE',
  s3KeyPrefix: 'S3_KEY_PREFIX', storageSigningKey: 'STORAGE_SIGNING_KEY',
  outputUrlTtlSeconds: 'OUTPUT_URL_TTL_SECONDS', customerOutputUrlTtlSeconds: 'CUSTOMER_OUTPUT_URL_TTL_SECONDS',
  maxUploadBytes: 'MAX_UPLOAD_BYTES', allowPrivateEndpoints: 'STORAGE_ALLOW_PRIVATE_ENDPOINTS',
} as const;

export type StorageConfig = ReturnType<typeof loadStorageConfig>;

/** The settings and their variables, for the server's `--help`. */
export const STORAGE_SETTINGS = { what: 'storage', shape, names };

/** Object storage settings, validated at boot; `env` is a parameter so tests never touch process.env. */
export function loadStorageConfig(env: NodeJS.ProcessEnv = process.env) {
  const config = loadEnv('storage', shape, names, env);
  if (config.storageProvider === 's3') {
    const missing = (['s3AccessKeyId', 's3SecretAccessKey'] as const).filter((field) => !config[field]).map((field) => names[field]);
    if (missing.length) throw new ConfigError(`invalid storage configuration: STORAGE_PROVIDER=s3 needs ${missing.join(' and ')}`);
  }
  return config;
}
