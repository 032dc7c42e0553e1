import net from 'node:net';
import type { Context, Next } from 'koa';
import { AppError, shortened } from '../../control-plane/api/errors';
import { hashSecret, type Metrics, sameHash } from '../../control-plane/api/startup';
import { bearerToken } from './bearer-token';
import { forwardingHeaderIn } from './forwarding-headers';

/**
 * `GET /metrics` in the Prometheus text format. With `METRICS_TOKEN` set, every scraper must
 * send `Authorization: Bearer <token>`; without it, only clients on this host may scrape, and
 * only directly: a request carrying any forwarding header (`X-Forwarded-For`, `Forwarded`,
 * `X-Real-IP`, … see forwarding-headers.ts) came through a proxy, whose loopback address says
 * nothing about the real client.
 */
export function metricsRoute(metrics: Metrics, token: string | undefined) {
  const expected = token ? hashSecret(token) : null;

  return async (context: Context, next: Next): Promise<void> => {
    if (context.path !== '/metrics') return await next();
    if (context.method !== 'GET') throw new AppError('not_found', `${context.method} /metrics is not an endpoint; scrape it with GET`);
    authorizeScrape(context, expected);
    const { contentType, body } = await metrics.render();
    context.status = 200;
    context.set({ 'content-type': contentType, 'cache-control': 'no-store' });
    context.body = body;
  };
}

function authorizeScrape(context: Context, expected: string | null): void {
  if (expected) {
    const presented = bearerToken(context.get('authorization'));
    if (!presented || !sameHash(hashSecret(presented), expected)) {
      throw new AppError('invalid_api_key', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>');
    }
    return;
  }
  // The socket's peer, never `context.ip`: that one follows X-Forwarded-For as soon as
  // `app.proxy` is set. Headers can only refuse a scrape here, never admit one.
  const forwarding = forwardingHeaderIn(context.req.headers);
  if (forwarding) {
    throw new AppError('permission_denied', `GET /metrics is served only to clients on this host, not through a proxy (this request carries ${shortened(forwarding)}); set METRICS_TOKEN to scrape through one`);
  }
  if (!isLoopbackAddress(context.req.socket.remoteAddress)) {
    throw new AppError('permission_denied', 'GET /metrics is served only to clients on this host; set METRICS_TOKEN to scrape from elsewhere');
  }
}

export function isLoopbackAddress(address: string | undefined): boolean {
  if (!address) return false;
  if (address === '::1') return true;
  const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
  return net.isIPv4(v4) && v4.startsWith('127.');
}
