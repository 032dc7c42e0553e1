import type { AppErrorCode } from '../../control-plane/errors/app-error';

export interface WireError {
  status: number;
  /** OpenAI `error.type`. */
  type: string;
  /** GraphQL `extensions.code`. */
  graphql: string;
}

/** Every AppError code in every wire form, decided once. */
export const ERROR_TABLE: Record<AppErrorCode, WireError> = {
  invalid_request: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  invalid_json: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  body_too_large: { status: 413, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  model_mismatch: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  wrong_modality: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  unsupported_endpoint: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  invalid_api_key: { status: 401, type: 'authentication_error', graphql: 'UNAUTHENTICATED' },
  permission_denied: { status: 403, type: 'permission_error', graphql: 'FORBIDDEN' },
  not_found: { status: 404, type: 'invalid_request_error', graphql: 'NOT_FOUND' },
  deployment_not_found: { status: 404, type: 'invalid_request_error', graphql: 'NOT_FOUND' },
  model_not_found: { status: 404, type: 'invalid_request_error', graphql: 'NOT_FOUND' },
  invalid_state_transition: { status: 409, type: 'invalid_request_error', graphql: 'INVALID_STATE_TRANSITION' },
  insufficient_quota: { status: 402, type: 'insufficient_quota', graphql: 'INSUFFICIENT_QUOTA' },
  rate_limit_error: { status: 429, type: 'rate_limit_error', graphql: 'RATE_LIMITED' },
  deployment_paused: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  no_replica_available: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  upstream_error: { status: 502, type: 'api_error', graphql: 'UPSTREAM_ERROR' },
  agent_disconnected: { status: 502, type: 'api_error', graphql: 'UPSTREAM_ERROR' },
  gateway_timeout: { status: 504, type: 'timeout_error', graphql: 'TIMEOUT' },
  image_input_unsupported: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  async_mask_unsupported: { status: 400, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  size_not_supported: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  resolution_not_supported: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  duration_mismatch: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  fps_mismatch: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  invalid_webhook_url: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  idempotency_key_reused: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  storage_credential_not_found: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  storage_credential_not_verified: { status: 422, type: 'invalid_request_error', graphql: 'BAD_USER_INPUT' },
  request_not_cancellable: { status: 409, type: 'invalid_request_error', graphql: 'CONFLICT' },
  video_not_cancellable: { status: 409, type: 'invalid_request_error', graphql: 'CONFLICT' },
  video_not_ready: { status: 409, type: 'invalid_request_error', graphql: 'CONFLICT' },
  batch_not_cancellable: { status: 409, type: 'invalid_request_error', graphql: 'CONFLICT' },
  replica_saturated: { status: 429, type: 'rate_limit_error', graphql: 'RATE_LIMITED' },
  no_pod_available: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  image_generation_timeout: { status: 504, type: 'timeout_error', graphql: 'TIMEOUT' },
  image_edit_timeout: { status: 504, type: 'timeout_error', graphql: 'TIMEOUT' },
  storage_upload_failed: { status: 502, type: 'api_error', graphql: 'UPSTREAM_ERROR' },
  shared_pool_busy: { status: 429, type: 'rate_limit_error', graphql: 'RATE_LIMITED' },
  shared_model_unavailable: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  service_unavailable: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  budget_exceeded: { status: 429, type: 'rate_limit_error', graphql: 'RATE_LIMITED' },
  server_busy: { status: 503, type: 'service_unavailable_error', graphql: 'UNAVAILABLE' },
  internal_error: { status: 500, type: 'api_error', graphql: 'INTERNAL_SERVER_ERROR' },
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
  canceled: 'upstream_error',
  // A relayed guest whose slot on the peer was taken meanwhile (cluster.v1).
  shared_pool_busy: 'shared_pool_busy',
};
