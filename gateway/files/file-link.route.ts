import type { Context, Next } from 'koa';
import { AppError, shortened } from '../../control-plane/api/errors';
import { assertObjectKey, DEFAULT_CONTENT_TYPE, type LocalObjectStore } from '../../control-plane/api/records';
import { decodePathSegment } from '../http/path-segment';
import { sendObject, type ObjectDownloadOptions } from './object-download';

export interface FileLinkRouteOptions {
  /** The local store this server serves links of (its bucket; others are 404). */
  store: LocalObjectStore;
  /** Largest accepted upload (PUT body); larger ones get 413 `body_too_large`. */
  maxUploadBytes: number;
  /** How downloads are sent: as the client reads, cut when it stops (object-download.ts). */
  downloads: ObjectDownloadOptions;
}

const FILE_PATH = /^\/files\/([^/]+)\/(.+)$/;
const CONTENT_TYPE = /^[\x20-\x7e]{1,200}$/;

/**
 * Outputs are user-generated and uploaded by agents on hosts we do not control, yet served
 * from the gateway's own origin: never let a browser sniff or run them as a page.
 */
const DOWNLOAD_HEADERS = {
  'x-content-type-options': 'nosniff',
  'content-security-policy': "default-src 'none'; sandbox",
  'cache-control': 'private',
};

/**
 * `GET|HEAD|PUT /files/<bucket>/<key>?expires=…&method=…&signature=…`: the local store's
 * presigned links. Agents PUT outputs here and clients GET them, neither holding credentials;
 * the HMAC signature is the whole authorization, so no API key is asked for.
 */
export function fileLinkRoute(options: FileLinkRouteOptions) {
  const lookup = (bucket: string) => (bucket === options.store.bucket ? options.store : undefined);

  return async (context: Context, next: Next): Promise<void> => {
    const match = FILE_PATH.exec(context.path);
    if (!match) return await next();
    const method = context.method;
    if (method !== 'GET' && method !== 'HEAD' && method !== 'PUT') {
      throw new AppError('not_found', `${method} is not supported on file links; they accept GET, HEAD and PUT`);
    }
    const bucket = decodePathSegment(match[1], 'key');
    const key = match[2].split('/').map((segment) => decodePathSegment(segment, 'key')).join('/');
    assertObjectKey(key);
    const store = lookup(bucket);
    if (!store) throw new AppError('permission_denied', `this link is not valid: bucket '${shortened(bucket)}' is not served here`);
    const linkMethod = method === 'PUT' ? 'PUT' : 'GET';
    const query = (name: string) => (typeof context.query[name] === 'string' ? context.query[name] as string : '');
    if (query('method') !== linkMethod) {
      throw new AppError('permission_denied', `this link is for ${shortened(query('method')) || 'no method'}, not ${linkMethod}`);
    }
    store.verifyLink(linkMethod, bucket, key, query('expires'), query('signature'));

    if (method === 'PUT') return await receive(context, store, key, options.maxUploadBytes);
    if (method === 'HEAD') {
      const head = await store.head(key);
      if (!head) throw notFound(bucket, key);
      context.status = 200;
      context.set({ ...DOWNLOAD_HEADERS, 'content-type': head.contentType, 'content-length': String(head.size) });
      return;
    }
    const opened = await store.open(key);
    if (!opened) throw notFound(bucket, key);
    context.set({ ...DOWNLOAD_HEADERS, 'content-type': opened.contentType });
    await sendObject(context, opened, options.downloads);
  };
}

async function receive(context: Context, store: LocalObjectStore, key: string, maxUploadBytes: number): Promise<void> {
  const contentType = context.get('content-type') || DEFAULT_CONTENT_TYPE;
  if (!CONTENT_TYPE.test(contentType)) {
    throw new AppError('invalid_request', 'content-type must be 1 to 200 printable characters', { param: 'content-type' });
  }
  const declared = Number(context.get('content-length'));
  if (declared > maxUploadBytes) {
    throw new AppError('body_too_large', `upload of ${declared} bytes is larger than the limit of ${maxUploadBytes} bytes`);
  }
  await store.putStream(key, context.req, contentType, maxUploadBytes);
  // 200 with an empty body, as S3 answers a PUT, so agents treat both stores alike.
  context.status = 200;
  context.body = '';
  context.remove('content-type');
}


function notFound(bucket: string, key: string): AppError {
  return new AppError('not_found', `no file at ${shortened(`${bucket}/${key}`)}: it was never uploaded, or it has been removed`);
}
