import { HeaderMap } from '@apollo/server';
import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import type { Logger } from 'pino';
import { AppError, asAppError, capMessage, ERROR_TABLE } from '../../control-plane/api/errors';
import { GRAPHQL_CODES } from './graphql-codes';

/**
 * Every GraphQL error as a client sees it, over HTTP (Apollo's formatError) and graphql-ws:
 * message, locations, path and `extensions` with `code` (and `param` when a field is at
 * fault), nothing else. Whatever NODE_ENV says, no stack trace or server path leaves the
 * server (Apollo adds `extensions.stacktrace` outside production and test); bugs are logged
 * with their stack and answered as INTERNAL_SERVER_ERROR "internal error".
 */
export function formatGraphQLError(formatted: GraphQLFormattedError, error: unknown, logger: Logger): GraphQLFormattedError {
  const { locations, path } = formatted;
  // graphql-js quotes a bad argument or variable whole (`Variable "$id" got invalid value "…100 KB…"`).
  const message = capMessage(formatted.message);
  const appError = appErrorIn(error);
  if (appError) {
    if (appError.code === 'internal_error') logger.error({ err: appError.cause ?? appError }, 'graphql operation failed');
    return { message: appError.message, locations, path, extensions: { code: GRAPHQL_CODES[appError.code], param: appError.param } };
  }
  // Apollo files every validation error under GRAPHQL_VALIDATION_FAILED; our rules (query limits, NUL bytes) keep their own code.
  const ruleExtensions = (error as { originalError?: unknown }).originalError instanceof GraphQLError
    ? clientExtensions(((error as { originalError: GraphQLError }).originalError).extensions)
    : null;
  if (ruleExtensions) return { message, locations, path, extensions: ruleExtensions };
  const extensions = clientExtensions(formatted.extensions);
  if (extensions && extensions.code !== 'INTERNAL_SERVER_ERROR') return { message, locations, path, extensions };
  if (isRequestRefusal(error)) return { message, locations, path, extensions: { code: 'BAD_REQUEST' } };
  const unavailable = asAppError(error instanceof GraphQLError ? error.originalError ?? error : error);
  if (unavailable.code === 'service_unavailable') return { message: unavailable.message, locations, path, extensions: { code: GRAPHQL_CODES.service_unavailable } };
  logger.error({ err: error instanceof GraphQLError ? error.originalError ?? error : error }, 'graphql operation failed');
  return { message: 'internal error', locations, path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
}

/** `code` and `param` only; null without a code. */
function clientExtensions(extensions: Record<string, unknown> | undefined): { code: string; param?: string } | null {
  const code = extensions?.code;
  if (typeof code !== 'string') return null;
  const param = extensions?.param;
  return typeof param === 'string' ? { code, param } : { code };
}

/** The AppError a GraphQL error wraps (a resolver's, a subscription filter's), however deep. */
function appErrorIn(error: unknown): AppError | null {
  let current = error;
  for (let depth = 0; depth < 5 && current; depth++) {
    if (current instanceof AppError) return current;
    current = (current as { originalError?: unknown }).originalError;
  }
  return null;
}

/**
 * Apollo refuses some requests with an HTTP 400 and no code (a persisted query whose version
 * is not 1, or whose sha256Hash does not match the query): the client's mistake, not a bug.
 */
function isRequestRefusal(error: unknown): boolean {
  if (!(error instanceof GraphQLError) || error.originalError) return false;
  const status = (error.extensions.http as { status?: unknown } | undefined)?.status;
  return typeof status === 'number' && status >= 400 && status < 500;
}

/**
 * `appError` as a GraphQLError that also sets the HTTP response's status and Retry-After (Apollo
 * reads `extensions.http` and removes it; formatGraphQLError then answers with the table's code).
 * Thrown while building the context or from a resolver whose refusal the status must carry (a
 * 429 over HTTP); over graphql-ws only the code travels.
 */
export function withHttpStatus(appError: AppError): GraphQLError {
  const status = ERROR_TABLE[appError.code].status;
  const headers = new HeaderMap();
  if (appError.retryAfterSeconds !== undefined) headers.set('retry-after', String(appError.retryAfterSeconds));
  return new GraphQLError(appError.message, {
    originalError: appError,
    extensions: { code: GRAPHQL_CODES[appError.code], http: { status, headers } },
  });
}
