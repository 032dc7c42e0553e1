import { AppError } from '../../control-plane/errors/app-error';
import { asAppError } from '../../control-plane/database/database-unavailable';
import type { JobFailure } from '../../control-plane/dispatch/job';
import { ERROR_TABLE, JOB_FAILURE_TO_APP_ERROR } from '../../control-plane/openai/error-table';
import { parseJsonText } from '../../common/json-nesting';
import { RateLimitRefusal } from '../../control-plane/rate-limits/rate-limit-decision';
import { refusalRateLimitHeaders } from '../http/rate-limit-headers';

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Any thrown value as the OpenAI error body; unknown errors become a 500 without internals. */
export function renderError(error: unknown): RenderedError {
  const appError = asAppError(error);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (appError.retryAfterSeconds !== undefined) headers['retry-after'] = String(appError.retryAfterSeconds);
  if (appError instanceof RateLimitRefusal) Object.assign(headers, refusalRateLimitHeaders(appError));
  if (appError.upstreamStatus && appError.upstreamBody && isOpenAiErrorBody(appError.upstreamBody)) {
    return { status: appError.upstreamStatus, headers, body: appError.upstreamBody };
  }
  return { status: appError.upstreamStatus ?? ERROR_TABLE[appError.code].status, headers, body: Buffer.from(JSON.stringify(errorBody(appError))) };
}

export function errorBody(error: AppError): { error: { message: string; type: string; param: string | null; code: string } } {
  return { error: { message: error.message, type: ERROR_TABLE[error.code].type, param: error.param, code: error.code } };
}

/** An agent's job failure as the error the client sees (an engine 4xx keeps the engine's status and body). */
export function jobFailureError(failure: JobFailure): AppError {
  const code = JOB_FAILURE_TO_APP_ERROR[failure.code] ?? 'upstream_error';
  if (failure.code === 'engine_rejected' && failure.engineStatus >= 400 && failure.engineStatus < 500) {
    return new AppError('invalid_request', failure.message || 'the engine rejected the request', {
      upstreamStatus: failure.engineStatus, upstreamBody: failure.engineBody ?? undefined,
    });
  }
  const message = failure.code === 'pod_crash' ? `the replica serving this request failed: ${failure.message}` : failure.message || failure.code;
  return new AppError(code, message, code === 'shared_pool_busy' ? { retryAfterSeconds: 1 } : {});
}

function isOpenAiErrorBody(body: Buffer): boolean {
  try {
    const parsed = parseJsonText(body) as { error?: unknown } | null;
    return typeof parsed?.error === 'object' && parsed.error !== null;
  } catch {
    return false;
  }
}
