/**
 * The door's errors (docs/layers.md#the-door): the error the control plane throws (`AppError`),
 * how the gateway renders it (the OpenAI error body and table, quoting values into messages) and
 * the checks whose refusals it renders (NUL bytes, an unavailable database, a rate limit).
 */
export { AppError } from '../errors/app-error';
export type { AppErrorCode } from '../errors/app-error';
export { capMessage, quoteValue, shortened } from '../errors/quote-value';
export { asAppError } from '../database/database-unavailable';
export { fieldPath, findNulByte, nulByteMessage, refuseLoneSurrogates, refuseNulBytes } from '../database/nul-bytes';
export type { NulBytePosition } from '../database/nul-bytes';
export { errorBody, jobFailureError, openAiErrorResponse } from '../openai/openai-error';
export { ERROR_TABLE } from '../openai/error-table';
export { RateLimitRefusal } from '../rate-limits/rate-limit-decision';
export type { RateLimitDecision } from '../rate-limits/rate-limit-decision';
