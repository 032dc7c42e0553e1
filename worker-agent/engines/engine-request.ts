/**
 * Turns an assigned job into the body an OpenAI-compatible engine receives. The client's JSON
 * is parsed once; only `model`, `stream`, `stream_options`, and the platform's own `priority`
 * and `cache_salt` are touched, and every other field (unknown ones included) reaches the
 * engine unchanged.
 */
import type { JobKind } from '../../proto/worker/v1/index';
import type { EngineJob } from './engine';
import { EngineFailure } from './engine-failure';
import { parseJsonText } from '../../common/json-nesting';

export type EngineRoutePath = '/v1/chat/completions' | '/v1/completions' | '/v1/embeddings';

export interface EngineRequest {
  readonly path: EngineRoutePath;
  /** The rewritten body as an object (in-process engines use it without re-parsing). */
  readonly payload: Record<string, unknown>;
  /** `payload` serialised, for HTTP engines. */
  readonly bytes: Buffer;
}

const ROUTE_BY_KIND: Partial<Record<JobKind, EngineRoutePath>> = {
  JOB_KIND_CHAT_COMPLETION: '/v1/chat/completions',
  JOB_KIND_COMPLETION: '/v1/completions',
  JOB_KIND_EMBEDDING: '/v1/embeddings',
};

/**
 * @param priority the engine's per-request `priority` (vLLM: lower is served first), set over
 * whatever the client sent; undefined leaves the body's own field, if any, as it is
 * @param cacheSalt chat and completions: the engine's `cache_salt` (vLLM, SGLang), set over
 * whatever the client sent, which the gateway refuses anyway; undefined removes the client's
 * (only the platform picks a salt). An embeddings body is left as it is: TEI refuses fields it
 * does not know, and embedding replicas serve one workspace.
 */
export function prepareEngineRequest(job: EngineJob, engineModel: string | undefined, priority?: number, cacheSalt?: string): EngineRequest {
  const path = ROUTE_BY_KIND[job.kind];
  if (!path) throw new EngineFailure('invalid_job', `job kind ${job.kind} is not served by this engine`);
  const payload = parseObject(job.body);
  payload.model = engineModel ?? job.model;
  if (path === '/v1/embeddings') {
    // Embeddings never stream, and TEI refuses fields it does not know, so none are added.
    if (priority !== undefined) payload.priority = priority;
    return { path, payload, bytes: Buffer.from(JSON.stringify(payload)) };
  }
  payload.stream = job.stream;
  if (priority !== undefined) payload.priority = priority;
  if (cacheSalt) payload.cache_salt = cacheSalt;
  else delete payload.cache_salt;
  if (job.stream) {
    // Usage is always requested so billing never sees a $0 stream; the agent drops the
    // usage-only chunk again when the client did not ask for it.
    const existing = isObject(payload.stream_options) ? payload.stream_options : {};
    payload.stream_options = { ...existing, include_usage: true };
  } else {
    // vLLM answers 400 to `stream_options` on a non-streamed request.
    delete payload.stream_options;
  }
  return { path, payload, bytes: Buffer.from(JSON.stringify(payload)) };
}

/** A job body (the client's JSON, as the control plane forwarded it) as an object; `invalid_job` otherwise. */
export function parseObject(body: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = parseJsonText(body);
  } catch (error) {
    throw new EngineFailure('invalid_job', 'job body is not valid JSON', { cause: error });
  }
  if (!isObject(parsed)) throw new EngineFailure('invalid_job', 'job body must be a JSON object');
  return parsed;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
