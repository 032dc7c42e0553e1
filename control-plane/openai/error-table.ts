import type { AppErrorCode } from '../errors/app-error';

export interface WireError {
  status: number;
  /** OpenAI `error.type`. */
  type: string;
}

/**
 * Every AppError code as the OpenAI API answers it, decided once: its HTTP status and OpenAI
 * `type` (a live call's and a batch line's alike; the GraphQL API's codes are the gateway's,
 * gateway/graphql/graphql-codes.ts, and GraphQL over HTTP sets the status given here).
 */
export const ERROR_TABLE: Record<AppErrorCode, WireError> = {
  invalid_request: { status: 400, type: 'invalid_request_error' },
  invalid_json: { status: 400, type: 'invalid_request_error' },
  body_too_large: { status: 413, type: 'invalid_request_error' },
  model_mismatch: { status: 400, type: 'invalid_request_error' },
  wrong_modality: { status: 400, type: 'invalid_request_error' },
  unsupported_endpoint: { status: 400, type: 'invalid_request_error' },
  invalid_api_key: { status: 401, type: 'authentication_error' },
  permission_denied: { status: 403, type: 'permission_error' },
  not_found: { status: 404, type: 'invalid_request_error' },
  deployment_not_found: { status: 404, type: 'invalid_request_error' },
  model_not_found: { status: 404, type: 'invalid_request_error' },
  invalid_state_transition: { status: 409, type: 'invalid_request_error' },
  insufficient_quota: { status: 402, type: 'insufficient_quota' },
  rate_limit_error: { status: 429, type: 'rate_limit_error' },
  deployment_paused: { status: 503, type: 'service_unavailable_error' },
  no_replica_available: { status: 503, type: 'service_unavailable_error' },
  upstream_error: { status: 502, type: 'api_error' },
  agent_disconnected: { status: 502, type: 'api_error' },
  gateway_timeout: { status: 504, type: 'timeout_error' },
  image_input_unsupported: { status: 400, type: 'invalid_request_error' },
  async_mask_unsupported: { status: 400, type: 'invalid_request_error' },
  size_not_supported: { status: 422, type: 'invalid_request_error' },
  resolution_not_supported: { status: 422, type: 'invalid_request_error' },
  duration_mismatch: { status: 422, type: 'invalid_request_error' },
  fps_mismatch: { status: 422, type: 'invalid_request_error' },
  invalid_webhook_url: { status: 422, type: 'invalid_request_error' },
  idempotency_key_reused: { status: 422, type: 'invalid_request_error' },
  storage_credential_not_found: { status: 422, type: 'invalid_request_error' },
  storage_credential_not_verified: { status: 422, type: 'invalid_request_error' },
  request_not_cancellable: { status: 409, type: 'invalid_request_error' },
  video_not_cancellable: { status: 409, type: 'invalid_request_error' },
  video_not_ready: { status: 409, type: 'invalid_request_error' },
  batch_not_cancellable: { status: 409, type: 'invalid_request_error' },
  upload_link_used: { status: 409, type: 'invalid_request_error' },
  replica_saturated: { status: 429, type: 'rate_limit_error' },
  no_pod_available: { status: 503, type: 'service_unavailable_error' },
  image_generation_timeout: { status: 504, type: 'timeout_error' },
  image_edit_timeout: { status: 504, type: 'timeout_error' },
  storage_upload_failed: { status: 502, type: 'api_error' },
  adapter_load_failed: { status: 422, type: 'invalid_request_error' },
  shared_pool_busy: { status: 429, type: 'rate_limit_error' },
  shared_model_unavailable: { status: 503, type: 'service_unavailable_error' },
  service_unavailable: { status: 503, type: 'service_unavailable_error' },
  budget_exceeded: { status: 429, type: 'rate_limit_error' },
  server_busy: { status: 503, type: 'service_unavailable_error' },
  internal_error: { status: 500, type: 'api_error' },
};

/** Agent failure codes (proto `Failed.code`) as the AppError the client sees. */
export const JOB_FAILURE_TO_APP_ERROR: Record<string, AppErrorCode> = {
  engine_rejected: 'invalid_request',
  engine_error: 'upstream_error',
  engine_unavailable: 'upstream_error',
  deadline_exceeded: 'gateway_timeout',
  agent_draining: 'no_replica_available',
  invalid_job: 'invalid_request',
  pod_crash: 'agent_disconnected',
  vram_exceeded: 'upstream_error',
  model_timeout: 'gateway_timeout',
  storage_upload_failed: 'upstream_error',
  // Only the jobs that need the adapter fail; the replica keeps serving (docs/adapters.md).
  adapter_load_failed: 'adapter_load_failed',
  canceled: 'upstream_error',
  // A relayed guest whose slot on the peer was taken meanwhile (cluster.v1).
  shared_pool_busy: 'shared_pool_busy',
  // A relayed job that waited on the peer for a replica of a deployment at zero, past the peer's cold-start bounds (cluster.v1).
  no_pod_available: 'no_pod_available',
};
