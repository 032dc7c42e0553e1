import type { Context, Next } from 'koa';
import { AppError } from '../../../control-plane/api/errors';
import type { RecordsPort } from '../../../control-plane/api/records';
import { decodePathSegment } from '../../http/path-segment';
import { fileObject } from './batch-objects';

const UPLOAD_PATH = /^\/uploads\/([^/]+)$/;
const LENGTH = /^\d{1,15}$/;
const QUERY_NAMES = new Set(['workspace', 'deployment', 'filename', 'bytes', 'expires', 'signature']);

/**
 * `PUT /uploads/<fileId>?…&signature=…`: a signed one-time upload link (createAdapterUploadLink)
 * takes a file's raw bytes and answers OpenAI's File object. The signature is the whole
 * authorization, as with the store's links, so no API key is asked for. No CORS headers: the
 * console that asks for links is served from this origin, and other origins' pages get no
 * preflight answer, so a browser never lets them use a link.
 */
export function fileUploadRoute(uploads: RecordsPort['fileUploads']) {
  return async (context: Context, next: Next): Promise<void> => {
    const match = UPLOAD_PATH.exec(context.path);
    if (!match) return await next();
    context.set({ 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    if (context.method !== 'PUT') {
      throw new AppError('not_found', `${context.method} is not supported on upload links; PUT the file's bytes`);
    }
    const fileId = decodePathSegment(match[1], 'id');
    const grant = uploads.verify(fileId, (name) => {
      if (!QUERY_NAMES.has(name)) return '';
      const value = context.query[name];
      return typeof value === 'string' ? value : '';
    });
    const header = context.get('content-length');
    if (!LENGTH.test(header)) {
      throw new AppError('invalid_request', 'content-length is required: PUT the file as one body of known length (not chunked)', { param: 'content-length' });
    }
    const file = await uploads.receive(grant, context.req, Number(header));
    context.status = 201;
    context.body = fileObject(file);
  };
}
