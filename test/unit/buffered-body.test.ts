import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { takeBufferedBody } from '../../gateway/http/buffered-body';
import { readBody, UNCOUNTED } from '../../gateway/http/read-body';

/**
 * takeBufferedBody on a real node:http server, started a turn after the request (as the guest
 * lane starts its work): what it takes must be the body, byte for byte, or nothing, after which
 * readBody still reads the whole body; and the connection must stay usable.
 */
describe('takeBufferedBody', () => {
  let server: http.Server;
  let port: number;
  const seen: Array<{ taken: string | null; read: string }> = [];

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      setImmediate(async () => {
        const taken = takeBufferedBody(request, 64);
        const read = taken ?? await readBody(request, 1_000, UNCOUNTED).catch(() => Buffer.from('(too large)'));
        seen.push({ taken: taken === undefined ? null : taken.toString(), read: read.toString() });
        response.end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  beforeEach(() => (seen.length = 0));

  /** Sends raw HTTP on one connection, the parts `gapMs` apart, and resolves with everything the server answered once `answers` responses came. */
  function raw(parts: string[], answers: number, gapMs = 0): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1');
      let received = '';
      socket.on('data', (chunk) => {
        received += chunk.toString();
        if (received.split('HTTP/1.1 200').length - 1 === answers) {
          socket.end();
          resolve(received);
        }
      });
      socket.on('error', reject);
      void (async () => {
        for (const part of parts) {
          socket.write(part);
          if (gapMs) await new Promise((resolve) => setTimeout(resolve, gapMs));
        }
      })();
    });
  }
  const post = (body: string, extra = '') => `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${extra}\r\n${body}`;

  test('a body that arrived with its headers is taken whole, synchronously; the next request on the connection gets its own', async () => {
    await raw([post('{"model":"a"}') + post('{"model":"ü"}')], 2);
    expect(seen).toEqual([{ taken: '{"model":"a"}', read: '{"model":"a"}' }, { taken: '{"model":"ü"}', read: '{"model":"ü"}' }]);
  });

  test('an empty body is an empty buffer', async () => {
    await raw([post('')], 1);
    expect(seen).toEqual([{ taken: '', read: '' }]);
  });

  test('a body still arriving is left to readBody, which reads all of it', async () => {
    const body = '{"model":"split across two packets"}';
    await raw([post(body).slice(0, -10), body.slice(-10)], 1, 50);
    expect(seen).toEqual([{ taken: null, read: body }]);
  });

  test('a chunked body is taken once its last chunk arrived', async () => {
    await raw(['POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n'], 1);
    expect(seen).toEqual([{ taken: 'abcde', read: 'abcde' }]);
  });

  test('a body over the limit is not taken (readBody answers for it)', async () => {
    const body = 'x'.repeat(100);
    await raw([post(body)], 1);
    expect(seen).toEqual([{ taken: null, read: body }]);
  });
});
