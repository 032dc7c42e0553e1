import http from 'node:http';
import type net from 'node:net';
import Koa from 'koa';
import pino from 'pino';
import { errorMiddleware } from '../../gateway/errors/error-middleware';
import { fileLinkRoute, type FileLinkRouteOptions } from '../../gateway/files/file-link.route';
import { DownloadTally } from '../../gateway/files/object-download';

export interface FileLinkServer {
  readonly url: string;
  /** `/path?query` sent verbatim (no URL normalization, unlike fetch), for traversal attempts. */
  raw(method: string, pathAndQuery: string, body?: Buffer): Promise<{ status: number; body: string }>;
  stop(): Promise<void>;
}

/** The file-link route behind the gateway's real error middleware, on a real port 0 server. */
export async function startFileLinkServer(options: Omit<FileLinkRouteOptions, 'downloads'> & Partial<Pick<FileLinkRouteOptions, 'downloads'>>): Promise<FileLinkServer> {
  const server = http.createServer();
  const app = new Koa();
  app.silent = true;
  app.use(errorMiddleware(pino({ level: 'silent' })));
  app.use(fileLinkRoute({ downloads: { stallTimeoutMs: 30_000, maxBufferedBytes: 2 * 1024 * 1024, tally: new DownloadTally() }, ...options }));
  server.on('request', app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const { port } = server.address() as net.AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    raw: (method, pathAndQuery, body) => new Promise((resolve, reject) => {
      const request = http.request({ host: '127.0.0.1', port, method, path: pathAndQuery }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      });
      request.once('error', reject);
      request.end(body);
    }),
    async stop() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
