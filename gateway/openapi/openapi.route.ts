import { createHash } from 'node:crypto';
import type { Context, Next } from 'koa';
import { AppError } from '../../control-plane/api/errors';
import { OPENAPI_PATH, printOpenApiDocument } from './openapi-document';

/**
 * `GET /v1/openapi.json`: the document, with no key (it holds no secret, and client generators
 * fetch it before they have one). Built once: it changes only with the code, so a day's caching
 * and an ETag cost clients nothing.
 */
export function openApiRoute() {
  const body = printOpenApiDocument();
  const etag = `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

  return async (context: Context, next: Next): Promise<void> => {
    if (context.path !== OPENAPI_PATH) return await next();
    if (context.method !== 'GET' && context.method !== 'HEAD') throw new AppError('not_found', `${context.method} ${OPENAPI_PATH} is not an endpoint; fetch it with GET`);
    context.set({ 'cache-control': 'public, max-age=86400', etag });
    if (context.get('if-none-match') === etag) {
      context.status = 304;
      return;
    }
    context.status = 200;
    context.type = 'application/json';
    context.body = body;
  };
}
