import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import { AppError, shortened } from '../../control-plane/api/errors';
import { renderError } from './error-response';
import { markErrorOf, requestIdOf } from '../http/request-telemetry';
import { bodyLeftUnread } from '../http/unread-body';

/** Renders every thrown error as the OpenAI error body; only non-AppErrors are logged as bugs. */
export function errorMiddleware(logger: Logger) {
  return async (context: Context, next: Next): Promise<void> => {
    try {
      await next();
      if (context.status === 404 && context.body === undefined) {
        throw new AppError('not_found', `${shortened(context.method)} ${shortened(context.path)} is not an endpoint; deployment endpoints live under /d/<slug>/v1`);
      }
    } catch (error) {
      if (!(error instanceof AppError)) logger.error({ err: error, path: context.path, requestId: requestIdOf(context) }, 'unhandled error');
      markErrorOf(context, error instanceof AppError ? error.code : 'internal_error');
      if (context.headerSent || !context.writable) return;
      const rendered = renderError(error);
      context.respond = true;
      context.status = rendered.status;
      context.set(rendered.headers);
      if (bodyLeftUnread(context.req)) context.set('connection', 'close');
      context.body = rendered.body;
    }
  };
}
