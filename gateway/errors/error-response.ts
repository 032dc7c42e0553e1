import { asAppError, openAiErrorResponse, RateLimitRefusal } from '../../control-plane/api/errors';
import { refusalRateLimitHeaders } from '../http/rate-limit-headers';

export interface RenderedError {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

/** Any thrown value as the OpenAI error body with its HTTP headers; unknown errors become a 500 without internals. */
export function renderError(error: unknown): RenderedError {
  const appError = asAppError(error);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (appError.retryAfterSeconds !== undefined) headers['retry-after'] = String(appError.retryAfterSeconds);
  if (appError instanceof RateLimitRefusal) Object.assign(headers, refusalRateLimitHeaders(appError));
  const { status, body } = openAiErrorResponse(appError);
  return { status, headers, body };
}
