import { z } from 'zod';
import { envReader, intField } from '../config/env-fields';

const shape = {
  /** The largest adapter weights registered (a Files API upload or a bucket object), in bytes. @default 1073741824 (1 GiB) */
  maxBytes: intField(1).default(1_073_741_824),
  /** Adapters one workspace may register. @default 1000 */
  maxPerWorkspace: intField(1).default(1_000),
  /** The shortest life of an adapter's presigned link, when a job's deadline is nearer (an agent that queues a job still fetches in time). @default 300 */
  minLinkTtlSeconds: intField(1).default(300),
  /** How long an upload link (`createAdapterUploadLink`, the console's upload of weights) may be started; an upload under way at its expiry finishes. @default 900 */
  uploadLinkTtlSeconds: intField(10, 86_400).default(900),
  /** How long a workspace's adapter names are served from memory without a refresh; changes reach every server at once anyway (cluster notifier). @default 2000 */
  cacheTtlMs: intField(0).default(2_000),
};

const names = { maxBytes: 'ADAPTER_MAX_BYTES', maxPerWorkspace: 'ADAPTER_MAX_PER_WORKSPACE', minLinkTtlSeconds: 'ADAPTER_MIN_LINK_TTL_SECONDS', uploadLinkTtlSeconds: 'ADAPTER_UPLOAD_LINK_TTL_SECONDS', cacheTtlMs: 'ADAPTER_CACHE_TTL_MS' } as const;

export type AdapterConfig = ReturnType<typeof loadAdapterConfig>;

/** The settings and their variables, for the server's `--help`. */
export const ADAPTER_SETTINGS = { what: 'LoRA adapters', shape, names };

export const loadAdapterConfig = envReader('LoRA adapters', shape, names);
