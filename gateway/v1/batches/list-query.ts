import type { Context } from 'koa';
import { AppError, quoteValue, refuseNulBytes } from '../../../control-plane/api/errors';

/** A query parameter given at most once, or undefined; 400 naming it when it is repeated or holds a NUL. */
export function queryValue(context: Context, name: string): string | undefined {
  const value = context.query[name];
  if (Array.isArray(value)) throw new AppError('invalid_request', `${name} may be given once`, { param: name });
  if (value !== undefined) refuseNulBytes(value, name);
  return value;
}

/** `limit`: a whole number from 1 to `max`, `fallback` when absent. */
export function queryLimit(context: Context, fallback: number, max: number): number {
  const value = queryValue(context, 'limit');
  if (value === undefined) return fallback;
  const limit = /^\d{1,6}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= max)) throw new AppError('invalid_request', `limit must be an integer from 1 to ${max}, got ${quoteValue(value)}`, { param: 'limit' });
  return limit;
}
