import { AppError, type AppErrorCode } from '../errors/app-error';
import type { JobFailure } from '../dispatch/job';
import { ERROR_TABLE, JOB_FAILURE_TO_APP_ERROR } from './error-table';
import { parseJsonText } from '../../common/json-nesting';

/** An error as the OpenAI API answers it: its status and JSON body (the HTTP headers are the gateway's). */
export interface OpenAiErrorResponse {
  status: number;
  body: Buffer;
}

/** `appError` as the OpenAI error body and status; an engine's own OpenAI error body (a 4xx it answered) passes as it came. */
export function openAiErrorResponse(appError: AppError): OpenAiErrorResponse {
  if (appError.upstreamStatus && appError.upstreamBody && isOpenAiErrorBody(appError.upstreamBody)) {
    return { status: appError.upstreamStatus, body: appError.upstreamBody };
  }
  return { status: appError.upstreamStatus ?? ERROR_TABLE[appError.code].status, body: Buffer.from(JSON.stringify(errorBody(appError))) };
}

export function errorBody(error: AppError): { error: { message: string; type: string; param: string | null; code: string } } {
  return { error: { message: error.message, type: ERROR_TABLE[error.code].type, param: error.param, code: error.code } };
}

/**
 * The Retry-After of refusals a peer sends back for a relayed job (cluster.v1 carries no
 * Retry-After): a guest slot frees in about a second; a cold start past the peer's longest
 * wait is given the usual few seconds more.
 */
const RELAYED_RETRY_AFTER_SECONDS: Partial<Record<AppErrorCode, number>> = { shared_pool_busy: 1, no_pod_available: 5 };

/** An agent's job failure as the error the client sees (an engine 4xx keeps the engine's status and body). */
export function jobFailureError(failure: JobFailure): AppError {
  const code = JOB_FAILURE_TO_APP_ERROR[failure.code] ?? 'upstream_error';
  if (failure.code === 'engine_rejected' && failure.engineStatus >= 400 && failure.engineStatus < 500) {
    return new AppError('invalid_request', failure.message || 'the engine rejected the request', {
      upstreamStatus: failure.engineStatus, upstreamBody: failure.engineBody ?? undefined,
    });
  }
  if (failure.code === 'adapter_load_failed') {
    // A fetch of the weights that failed (the agent's 502) is the platform's trouble, not the
    // client's: 502 upstream_error. Weights that cannot load (malformed, another base, a rank
    // too big: 422) are the adapter's: 422 naming model (docs/adapters.md#errors).
    return new AppError(failure.engineStatus === 502 ? 'upstream_error' : 'adapter_load_failed', failure.message || 'the LoRA adapter could not be loaded', { param: 'model' });
  }
  const message = failure.code === 'pod_crash' ? `the replica serving this request failed: ${failure.message}` : failure.message || failure.code;
  return new AppError(code, message, { retryAfterSeconds: RELAYED_RETRY_AFTER_SECONDS[code] });
}

function isOpenAiErrorBody(body: Buffer): boolean {
  try {
    const parsed = parseJsonText(body) as { error?: unknown } | null;
    return typeof parsed?.error === 'object' && parsed.error !== null;
  } catch {
    return false;
  }
}
