import { AppError } from '../errors/app-error';
import { isStatementTimeout } from './tenant-queries';

/** SQLSTATE classes and codes that mean "the database is not there now", not "this query is wrong". */
const UNAVAILABLE_STATES = /^(08|57P0[123]|53300)/;
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND']);
/** What node-postgres says when its connection dies or a pool cannot hand one out in time. */
const UNAVAILABLE_MESSAGES = /Connection terminated|connection error|timeout exceeded when trying to connect|Client was closed|the database system is (starting up|shutting down)|is not currently accepting connections/i;

/**
 * True when an error (or its cause, or TypeORM's driverError) says the database is unreachable
 * or restarting: a request that meets it gets 503 and may be retried, it is not a bug.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  let current = error as { code?: unknown; message?: unknown; cause?: unknown; driverError?: unknown; originalError?: unknown } | undefined;
  for (let depth = 0; depth < 6 && current && typeof current === 'object'; depth++) {
    if (typeof current.code === 'string' && (NETWORK_CODES.has(current.code) || UNAVAILABLE_STATES.test(current.code))) return true;
    if (typeof current.message === 'string' && UNAVAILABLE_MESSAGES.test(current.message)) return true;
    current = (current.driverError ?? current.cause ?? current.originalError) as typeof current;
  }
  return false;
}

/**
 * The AppError a client gets for an error that is not one: 503 when the database is away or a
 * tenant's query ran past its statement timeout, else a 500 for a bug.
 */
export function asAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  if (isStatementTimeout(error)) {
    // A tenant's query ran past its statement_timeout (tenant-queries.ts): the server is fine, the
    // query is too heavy for now; a smaller range or limit, or a retry when the database is less busy.
    return new AppError('service_unavailable', 'the query ran longer than the database allows a request\'s queries (TENANT_STATEMENT_TIMEOUT_MS) and was cancelled; ask for less (a shorter range, a smaller limit) or retry later', {
      retryAfterSeconds: 5, cause: error,
    });
  }
  if (isDatabaseUnavailable(error)) {
    return new AppError('service_unavailable', 'the service cannot reach its database right now; retry shortly', { retryAfterSeconds: 2, cause: error });
  }
  return new AppError('internal_error', 'internal error', { cause: error });
}
