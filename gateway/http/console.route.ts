import fs from 'node:fs';
import path from 'node:path';
import type { Context, Next } from 'koa';

export const CONSOLE_PATH = '/console';

/**
 * Where `npm run build` writes the console (Vite's output): `dist/console`, found from this
 * file whether it runs compiled (`dist/gateway/http`) or from source under jest (`gateway/http`).
 */
export function defaultConsoleDir(): string {
  const root = path.resolve(__dirname, '../..');
  return path.basename(root) === 'dist' ? path.join(root, 'console') : path.join(root, 'dist', 'console');
}

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon', '.json': 'application/json', '.woff2': 'font/woff2', '.map': 'application/json',
};

/**
 * The console talks only to this origin's `/graphql` (HTTP and WebSocket); previews load from
 * signed links, which may point at an S3-compatible bucket elsewhere (https only, or this origin).
 * `connect-src` names no bare scheme: `ws: wss:` let a script in the page open a WebSocket to
 * any host. 'self' covers this origin's ws:/wss: in CSP Level 3 browsers (Chromium 71+,
 * Firefox, Safari 16+); for older ones (Safari 15 matches 'self' to http(s) only) the page's
 * own host is spelled out as ws:// and wss://, taken from the request's Host header when it is a
 * plain host[:port], so nothing else can end up in the policy.
 */
export function contentSecurityPolicy(host: string | undefined): string {
  const sameHostSockets = host && host.length <= 261 && PLAIN_HOST.test(host) ? ` ws://${host} wss://${host}` : '';
  return [
    "default-src 'self'", "script-src 'self'", "style-src 'self' 'unsafe-inline'", `connect-src 'self'${sameHostSockets}`,
    "img-src 'self' data: blob: https:", "media-src 'self' blob: https:", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'",
  ].join('; ');
}

/** The one file outside `assets/` the app links to (index.html's `<link rel="icon">`; Vite copies it from console/public). */
const FAVICON = 'favicon.svg';

/** A DNS name or IP literal and an optional port: no wildcard, path, space or `;` can pass. */
const PLAIN_HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/**
 * `GET /console/*`: the built single-page app. Files under `assets/` have content hashes in
 * their names and are cached for a year; every other path is the app's own route and gets
 * `index.html` (never cached, so a new build is picked up at the next load).
 */
export function consoleRoute(dir: string = defaultConsoleDir()) {
  // Only files found are kept (a few hundred kB in all): a miss is not remembered, so requests
  // for made-up names cannot grow this map.
  const files = new Map<string, Buffer>();
  const read = (file: string): Buffer | null => {
    let content = files.get(file);
    if (!content) {
      try {
        content = fs.readFileSync(file);
      } catch {
        return null;
      }
      files.set(file, content);
    }
    return content;
  };
  return async (context: Context, next: Next): Promise<void> => {
    if (context.path !== CONSOLE_PATH && !context.path.startsWith(`${CONSOLE_PATH}/`)) return await next();
    if (context.method !== 'GET' && context.method !== 'HEAD') {
      context.status = 405;
      context.set('allow', 'GET, HEAD');
      return;
    }
    if (context.path === CONSOLE_PATH) return context.redirect(`${CONSOLE_PATH}/`);
    const relative = context.path.slice(CONSOLE_PATH.length + 1);
    // The Host header as sent, never X-Forwarded-Host (which Koa's `context.host` reads once `app.proxy` is set).
    context.set('content-security-policy', contentSecurityPolicy(context.get('host') || undefined));
    context.set('x-content-type-options', 'nosniff');
    context.set('referrer-policy', 'no-referrer');
    if (relative === FAVICON) {
      const icon = read(path.join(dir, FAVICON));
      if (icon) {
        context.type = TYPES['.svg'];
        // Not content-hashed: a day, so a changed icon shows up without a reload storm.
        context.set('cache-control', 'public, max-age=86400');
        context.body = icon;
        return;
      }
    }
    const asset = relative.startsWith('assets/') && /^[\w./-]+$/.test(relative) && !relative.includes('..') ? read(path.join(dir, relative)) : null;
    if (asset) {
      context.type = TYPES[path.extname(relative)] ?? 'application/octet-stream';
      context.set('cache-control', 'public, max-age=31536000, immutable');
      context.body = asset;
      return;
    }
    if (relative.startsWith('assets/')) {
      context.status = 404;
      context.type = 'text/plain';
      context.body = 'not found';
      return;
    }
    const index = read(path.join(dir, 'index.html'));
    context.set('cache-control', 'no-cache');
    if (!index) {
      context.status = 404;
      context.type = 'text/plain';
      context.body = 'The console is not built: `npm run build` builds it (npm start does).';
      return;
    }
    context.type = TYPES['.html'];
    context.body = index;
  };
}
