import http from 'node:http';
import type net from 'node:net';

export interface ReceivedDelivery {
  path: string;
  headers: http.IncomingHttpHeaders;
  rawBody: Buffer;
  receivedAt: number;
}

type Behaviour = (request: ReceivedDelivery, count: number) => { status: number; delayMs?: number; hang?: boolean };

/**
 * A real webhook receiver on 127.0.0.1 (the boundary we do not own). Each path has a
 * behaviour: `/ok` (and `/ok/…`) 200, `/fail` 500, `/slow/<ms>` answers 200 after <ms>, `/flaky/<n>` fails n
 * times then succeeds, `/hang` never answers; others can be set per test.
 */
export async function startReceiver() {
  const received: ReceivedDelivery[] = [];
  const counts = new Map<string, number>();
  const behaviours = new Map<string, Behaviour>();
  const hanging = new Set<http.ServerResponse>();
  const builtIn = (path: string): Behaviour => {
    if (path === '/ok' || path.startsWith('/ok/')) return () => ({ status: 200 });
    if (path === '/fail') return () => ({ status: 500 });
    if (path === '/hang') return () => ({ status: 200, hang: true });
    const slow = /^\/slow\/(\d+)$/.exec(path);
    if (slow) return () => ({ status: 200, delayMs: Number(slow[1]) });
    const flaky = /^\/flaky\/(\d+)(?:\/.*)?$/.exec(path);
    if (flaky) return (_request, count) => ({ status: count <= Number(flaky[1]) ? 503 : 200 });
    return () => ({ status: 404 });
  };
  const server = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part) => parts.push(part));
    request.on('end', () => {
      const path = request.url ?? '/';
      const delivery: ReceivedDelivery = { path, headers: request.headers, rawBody: Buffer.concat(parts), receivedAt: Date.now() };
      received.push(delivery);
      const count = (counts.get(path) ?? 0) + 1;
      counts.set(path, count);
      const behaviour = (behaviours.get(path) ?? builtIn(path))(delivery, count);
      if (behaviour.hang) {
        hanging.add(response);
        return;
      }
      // Unref'd: a slow answer still pending when the test ends keeps no process alive (close() cuts its connection).
      setTimeout(() => {
        if (!response.writableEnded && !response.destroyed) response.writeHead(behaviour.status).end();
      }, behaviour.delayMs ?? 0).unref();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return {
    base,
    received,
    at: (path: string) => received.filter((delivery) => delivery.path === path),
    set: (path: string, behaviour: Behaviour) => behaviours.set(path, behaviour),
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
