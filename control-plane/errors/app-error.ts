import { capMessage } from './quote-value';

/**
 * The one error vocabulary of the platform. Domain code throws `AppError` with a code from
 * this closed union; each wire form maps codes in one table (the OpenAI API's status and `type`,
 * a batch line's too: control-plane/openai/error-table.ts; GraphQL's codes:
 * gateway/graphql/graphql-codes.ts), so a status or an OpenAI `type` is decided in one place.
 */
export type AppErrorCode =
  | 'invalid_request'          // malformed body, wrong type, missing field (400)
  | 'invalid_json'             // body is not JSON (400)
  | 'body_too_large'           // over the documented size limit (413)
  | 'model_mismatch'           // `model` differs from the endpoint's model (400)
  | 'wrong_modality'           // endpoint called with the wrong kind of model (400)
  | 'unsupported_endpoint'     // e.g. chat on a base completion model (400)
  | 'invalid_api_key'          // 401
  | 'permission_denied'        // record of another workspace (403)
  | 'not_found'                // unknown route or record (404)
  | 'deployment_not_found'     // unknown deployment endpoint (404)
  | 'model_not_found'          // unknown model id (404)
  | 'invalid_state_transition' // e.g. pausing a deleted deployment (409)
  | 'insufficient_quota'       // credit exhausted (402)
  | 'rate_limit_error'         // RPM or TPD exceeded (429, Retry-After)
  | 'deployment_paused'        // 503
  | 'no_replica_available'     // 503
  | 'upstream_error'           // engine or agent failed (502)
  | 'agent_disconnected'       // the replica's agent vanished mid-request (502)
  | 'gateway_timeout'          // 120 s budget exceeded (504)
  | 'image_input_unsupported'  // image edit on a model without image input (400)
  | 'async_mask_unsupported'   // image edit with a mask and async=true (400)
  | 'size_not_supported'       // image size not offered by the model (422)
  | 'resolution_not_supported' // video size/resolution not offered by the model (422)
  | 'duration_mismatch'        // video duration off the pinned native one by more than 0.5 s (422)
  | 'fps_mismatch'             // video fps differs from the pinned native fps (422)
  | 'invalid_webhook_url'      // webhook_url is not public HTTPS (422)
  | 'idempotency_key_reused'   // same Idempotency-Key, different request (422)
  | 'storage_credential_not_found'    // storage_credential_id unknown in the workspace (422)
  | 'storage_credential_not_verified' // storage credential not (or no longer) verified (422)
  | 'request_not_cancellable'  // cancel of a running or finished request (409)
  | 'video_not_cancellable'    // cancel of a running video (409)
  | 'video_not_ready'          // video content fetched before completion (409)
  | 'batch_not_cancellable'    // cancel of a batch that already ended or is finishing (409)
  | 'upload_link_used'         // a one-time upload link used a second time (409)
  | 'replica_saturated'        // every replica at its concurrency (429, Retry-After)
  | 'no_pod_available'         // no replica ready for a media job, or none in time for a request waiting at zero (503, Retry-After)
  | 'image_generation_timeout' // sync image budget exceeded (504)
  | 'image_edit_timeout'       // sync image edit budget exceeded (504)
  | 'storage_upload_failed'    // output could not be written to the bucket (502)
  | 'adapter_load_failed'      // the LoRA adapter `model` names could not be loaded on a replica: its weights are malformed, or not for the base (422, param model)
  | 'shared_pool_busy'         // guest demand exceeds the shared pool's idle capacity (429, Retry-After)
  | 'shared_model_unavailable' // every provider left the shared pool of the model (503)
  | 'service_unavailable'      // the database is unreachable or restarting (503, Retry-After)
  | 'budget_exceeded'          // the caller's share of a tenant budget is used up (429, Retry-After; budgets/)
  | 'server_busy'              // the server's own share of a tenant budget is used up (503, Retry-After)
  | 'internal_error';          // a bug: 500, never for bad input

export interface AppErrorOptions {
  /** The request field at fault (OpenAI `param`). */
  param?: string | null;
  /** Seconds until a retry can succeed (429/503). */
  retryAfterSeconds?: number;
  /** An engine's own HTTP status and body, passed to the client for engine 4xx. */
  upstreamStatus?: number;
  upstreamBody?: Buffer;
  cause?: unknown;
}

export class AppError extends Error {
  readonly code: AppErrorCode;
  readonly param: string | null;
  readonly retryAfterSeconds?: number;
  readonly upstreamStatus?: number;
  readonly upstreamBody?: Buffer;

  constructor(code: AppErrorCode, message: string, options: AppErrorOptions = {}) {
    // Messages echo client values: whatever built one, a huge one is capped here (quote-value.ts).
    super(capMessage(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.param = options.param ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds;
    this.upstreamStatus = options.upstreamStatus;
    this.upstreamBody = options.upstreamBody;
  }
}
