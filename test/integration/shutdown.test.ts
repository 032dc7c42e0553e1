import net from 'node:net';
import { startTestServer } from '../support/test-server';

describe('shutdown', () => {
  it('a client holding a request open does not hold the server: its connection is cut after SHUTDOWN_GRACE_MS', async () => {
    const test = await startTestServer({ gateway: { shutdownGraceMs: 300 } });
    const { port, hostname } = new URL(test.url);
    // Headers promising a body that never comes: an active connection, not an idle one.
    const socket = net.connect(Number(port), hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write('POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"query":');
    const closed = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => setTimeout(resolve, 100));

    const startedAt = performance.now();
    await test.stop();
    const stopMs = performance.now() - startedAt;
    await closed;
    expect(stopMs).toBeLessThan(10_000);
    expect(socket.destroyed).toBe(true);
  }, 30_000);
});
