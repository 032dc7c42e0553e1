import net from 'node:net';
import fc from 'fast-check';

/** A request written byte by byte: what no HTTP client library would send. */
export interface RawCase {
  requestLine: string;
  headers: string[];
  body: Buffer;
  /** Bytes of latin1 written as they are (header values, paths). */
  label: string;
}

/**
 * Malformed HTTP/1.1 on the gateway's port: broken request lines, header framing, lengths that
 * lie, broken chunked encoding, oversized headers. Node's parser answers many itself (400,
 * 431); what reaches a route must still be under 500. The client half-closes after writing, so
 * a body that promised more than it sent ends there.
 */
export function rawCases(paths: readonly string[], authorization: string): fc.Arbitrary<RawCase> {
  const path = fc.oneof(
    { arbitrary: fc.constantFrom(...paths), weight: 4 },
    { arbitrary: fc.constantFrom('*', '', '/ /', '/\u00e9', '/%', 'http://x/graphql', '//', '/\t', '/a\u0001b', `/${'a'.repeat(9_000)}`), weight: 1 },
  );
  const method = fc.oneof({ arbitrary: fc.constant('POST'), weight: 6 }, { arbitrary: fc.constantFrom('GET', 'post', 'P0ST', 'CONNECT', '', 'GET POST', 'PRI'), weight: 1 });
  const version = fc.oneof({ arbitrary: fc.constant('HTTP/1.1'), weight: 6 }, { arbitrary: fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'HTTP/1.1 ', 'HTTPS/1.1', ''), weight: 1 });
  const body = fc.oneof(
    fc.constantFrom('{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}', '{"query":"{ __typename }"}', '{"model":"x","prompt":"p"}', '{', ''),
    fc.string({ unit: 'binary', maxLength: 40 }),
  ).map((text) => Buffer.from(text, 'utf8'));
  const framing = fc.constantFrom(
    'exact', 'exact', 'exact', 'longer', 'shorter', 'negative', 'not-a-number', 'two-lengths', 'chunked', 'chunked-bad-size', 'chunked-truncated',
    'chunked-and-length', 'none', 'huge-length',
  );
  const extraHeaders = fc.array(fc.constantFrom(
    'content-type: application/json', 'content-type: multipart/form-data; boundary=x', 'content-type: text/plain', 'X-No-Colon', ' folded: header', 'bad name: x',
    `x-long: ${'h'.repeat(20_000)}`, 'expect: 100-continue', 'expect: nonsense', 'transfer-encoding: gzip', 'content-encoding: gzip', 'host: a', 'host: b',
    'connection: keep-alive, upgrade', 'upgrade: websocket', 'x-request-id: \u00ff\u00fe', 'idempotency-key: \u00e9\u00e9', 'authorization: Bearer mk-\u00e9',
  ), { maxLength: 3 });
  return fc.record({ method, path, version, body, framing, extraHeaders, withAuth: fc.boolean() }).map(({ method, path: target, version, body: content, framing: frame, extraHeaders: extra, withAuth }) => {
    const headers = ['host: localhost', 'connection: close', ...(withAuth ? [`authorization: ${authorization}`] : []), ...extra];
    let payload = content;
    switch (frame) {
      case 'exact': headers.push(`content-length: ${content.length}`); break;
      case 'longer': headers.push(`content-length: ${content.length + 10}`); break;
      case 'shorter': headers.push(`content-length: ${Math.max(0, content.length - 3)}`); break;
      case 'negative': headers.push('content-length: -1'); break;
      case 'not-a-number': headers.push('content-length: 12abc'); break;
      case 'two-lengths': headers.push(`content-length: ${content.length}`, `content-length: ${content.length + 1}`); break;
      case 'chunked': headers.push('transfer-encoding: chunked'); payload = Buffer.concat([Buffer.from(`${content.length.toString(16)}\r\n`), content, Buffer.from('\r\n0\r\n\r\n')]); break;
      case 'chunked-bad-size': headers.push('transfer-encoding: chunked'); payload = Buffer.concat([Buffer.from('zz\r\n'), content, Buffer.from('\r\n0\r\n\r\n')]); break;
      case 'chunked-truncated': headers.push('transfer-encoding: chunked'); payload = Buffer.concat([Buffer.from('ff\r\n'), content]); break;
      case 'chunked-and-length': headers.push('transfer-encoding: chunked', `content-length: ${content.length}`); payload = Buffer.concat([Buffer.from(`${content.length.toString(16)}\r\n`), content, Buffer.from('\r\n0\r\n\r\n')]); break;
      case 'huge-length': headers.push('content-length: 99999999999999999999'); break;
      case 'none': break;
    }
    return { requestLine: `${method} ${target} ${version}`.trimEnd(), headers, body: payload, label: `${method} ${target.slice(0, 60)} ${frame}` };
  });
}

/** Writes the request, half-closes, and reads the status of the answer (null: the server closed without one). */
export async function sendRaw(port: number, testCase: RawCase, timeoutMs: number): Promise<{ status: number | null; timedOut: boolean }> {
  return await new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    let settled = false;
    const finish = (timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ status: finalStatus(answer), timedOut });
    };
    const timer = setTimeout(() => finish(true), timeoutMs);
    socket.on('connect', () => {
      socket.write(Buffer.concat([Buffer.from(`${testCase.requestLine}\r\n${testCase.headers.join('\r\n')}\r\n\r\n`, 'latin1'), testCase.body]));
      socket.end();
    });
    socket.on('data', (chunk) => {
      answer += chunk.toString('latin1');
      if (finalStatus(answer) !== null) finish(false);
    });
    socket.on('end', () => finish(false));
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
  });
}

/** The first status that is not 1xx (100 Continue comes before the answer), once its headers are in. */
function finalStatus(answer: string): number | null {
  for (const match of answer.matchAll(/HTTP\/1\.[01] (\d{3})[^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n/g)) {
    const status = Number(match[1]);
    if (status >= 200) return status;
  }
  return null;
}
