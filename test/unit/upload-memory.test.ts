import { EventEmitter } from 'node:events';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AppError } from '../../control-plane/errors/app-error';
import { readMultipart } from '../../gateway/http/multipart';
import { UploadMemory } from '../../gateway/http/upload-memory';

/** An upload of `bytes` and a response that closes when told. */
function exchange(bytes: number) {
  const response = Object.assign(new EventEmitter(), { closed: false }) as unknown as ServerResponse & { closed: boolean };
  const close = () => {
    response.closed = true;
    response.emit('close');
  };
  return { bytes, response, close };
}

function refusal(run: () => void): AppError {
  try {
    run();
  } catch (error) {
    return error as AppError;
  }
  throw new Error('not refused');
}

describe('UploadMemory', () => {
  const LIMIT = 1_000;

  it('holds each upload\'s declared length until its response closes, per workspace (429) and in all (503)', () => {
    const memory = new UploadMemory({ totalBytes: 1_000, perWorkspaceBytes: 600 });
    const first = exchange(500);
    memory.hold(first.response, 'ws_a', first.bytes);
    expect(memory.heldBytes).toBe(500);

    const sameWorkspace = exchange(200);
    const tooMuch = refusal(() => memory.hold(sameWorkspace.response, 'ws_a', sameWorkspace.bytes));
    expect(tooMuch).toMatchObject({ code: 'rate_limit_error', retryAfterSeconds: 1 });
    expect(tooMuch.message).toBe('this workspace already has 500 bytes of uploads being received by this server (at most 600 bytes at once); retry when one ends');

    const other = exchange(500);
    memory.hold(other.response, 'ws_b', other.bytes);
    expect(memory.heldBytes).toBe(1_000);
    const third = exchange(1);
    expect(refusal(() => memory.hold(third.response, 'ws_c', third.bytes))).toMatchObject({ code: 'service_unavailable', retryAfterSeconds: 1 });

    // Closing (answered, or the client gone) gives it back, once, whatever else is emitted.
    first.close();
    first.response.emit('close');
    expect(memory.heldBytes).toBe(500);
    memory.hold(sameWorkspace.response, 'ws_a', sameWorkspace.bytes);
    expect(memory.heldBytes).toBe(700);
    other.close();
    sameWorkspace.close();
    expect(memory.heldBytes).toBe(0);
  });

  it('readMultipart holds the declared length, the whole limit for a body that declares none, and nothing for one declared over the limit (413)', async () => {
    const memory = new UploadMemory({ totalBytes: 1_000_000, perWorkspaceBytes: 1_000_000 });
    const heldWhileReading: number[] = [];
    const server = http.createServer((request, response) => {
      const reading = readMultipart(request, LIMIT, { memory, response, workspaceId: 'ws_a' });
      heldWhileReading.push(memory.heldBytes);
      reading.then(() => response.end('read'), (error: AppError) => {
        response.statusCode = error.code === 'body_too_large' ? 413 : 400;
        response.end(error.code);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const form = '--b\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--b--\r\n';
    const send = (headers: Record<string, string>, body: string) => new Promise<number>((resolve, reject) => {
      const request = http.request({ port, method: 'POST', headers: { 'content-type': 'multipart/form-data; boundary=b', ...headers } }, (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      });
      request.on('error', reject);
      request.end(body);
    });
    try {
      expect(await send({ 'content-length': String(form.length) }, form)).toBe(200);
      expect(await send({ 'transfer-encoding': 'chunked' }, form)).toBe(200);
      expect(await send({ 'content-length': String(LIMIT + 1) }, 'x'.repeat(LIMIT + 1))).toBe(413);
      expect(heldWhileReading).toEqual([form.length, LIMIT, 0]);
      // Every response closed: everything given back (the server's 'close' may trail the client's answer).
      for (let waited = 0; memory.heldBytes !== 0 && waited < 100; waited++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(memory.heldBytes).toBe(0);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('takes an upload larger than a bound when nothing else is held there, and none beside it', () => {
    const memory = new UploadMemory({ totalBytes: 300, perWorkspaceBytes: 200 });
    const big = exchange(900);
    memory.hold(big.response, 'ws_a', big.bytes);
    const next = exchange(1);
    expect(refusal(() => memory.hold(next.response, 'ws_b', next.bytes)).code).toBe('service_unavailable');
    big.close();
    memory.hold(next.response, 'ws_b', next.bytes);
    expect(memory.heldBytes).toBe(1);
  });

  it('holds nothing for a response that already closed (no close event is left to give it back)', () => {
    const memory = new UploadMemory({ totalBytes: 1_000, perWorkspaceBytes: 1_000 });
    const gone = exchange(500);
    gone.close();
    memory.hold(gone.response, 'ws_a', gone.bytes);
    expect(memory.heldBytes).toBe(0);
  });
});
