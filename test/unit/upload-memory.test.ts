import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { AppError } from '../../control-plane/errors/app-error';
import { UploadMemory } from '../../gateway/http/upload-memory';

/** A request as UploadMemory reads it (its declared length) and a response that closes when told. */
function exchange(contentLength?: number) {
  const request = { headers: contentLength === undefined ? {} : { 'content-length': String(contentLength) } } as unknown as IncomingMessage;
  const response = Object.assign(new EventEmitter(), { closed: false }) as unknown as ServerResponse & { closed: boolean };
  const close = () => {
    response.closed = true;
    response.emit('close');
  };
  return { request, response, close };
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
    memory.hold(first.request, first.response, 'ws_a', LIMIT);
    expect(memory.heldBytes).toBe(500);

    const sameWorkspace = exchange(200);
    const tooMuch = refusal(() => memory.hold(sameWorkspace.request, sameWorkspace.response, 'ws_a', LIMIT));
    expect(tooMuch).toMatchObject({ code: 'rate_limit_error', retryAfterSeconds: 1 });
    expect(tooMuch.message).toBe('this workspace already has 500 bytes of uploads being received by this server (at most 600 bytes at once); retry when one ends');

    const other = exchange(500);
    memory.hold(other.request, other.response, 'ws_b', LIMIT);
    expect(memory.heldBytes).toBe(1_000);
    const third = exchange(1);
    expect(refusal(() => memory.hold(third.request, third.response, 'ws_c', LIMIT))).toMatchObject({ code: 'service_unavailable', retryAfterSeconds: 1 });

    // Closing (answered, or the client gone) gives it back, once, whatever else is emitted.
    first.close();
    first.response.emit('close');
    expect(memory.heldBytes).toBe(500);
    memory.hold(sameWorkspace.request, sameWorkspace.response, 'ws_a', LIMIT);
    expect(memory.heldBytes).toBe(700);
    other.close();
    sameWorkspace.close();
    expect(memory.heldBytes).toBe(0);
  });

  it('holds the whole limit for a body that declares no length, and nothing for one that declares more than the limit (the reader answers 413)', () => {
    const memory = new UploadMemory({ totalBytes: 10_000, perWorkspaceBytes: 10_000 });
    const chunked = exchange();
    memory.hold(chunked.request, chunked.response, 'ws_a', LIMIT);
    expect(memory.heldBytes).toBe(LIMIT);
    const oversized = exchange(LIMIT + 1);
    memory.hold(oversized.request, oversized.response, 'ws_a', LIMIT);
    expect(memory.heldBytes).toBe(LIMIT);
    chunked.close();
    expect(memory.heldBytes).toBe(0);
  });

  it('takes an upload larger than a bound when nothing else is held there, and none beside it', () => {
    const memory = new UploadMemory({ totalBytes: 300, perWorkspaceBytes: 200 });
    const big = exchange(900);
    memory.hold(big.request, big.response, 'ws_a', LIMIT);
    const next = exchange(1);
    expect(refusal(() => memory.hold(next.request, next.response, 'ws_b', LIMIT)).code).toBe('service_unavailable');
    big.close();
    memory.hold(next.request, next.response, 'ws_b', LIMIT);
    expect(memory.heldBytes).toBe(1);
  });

  it('holds nothing for a response that already closed (no close event is left to give it back)', () => {
    const memory = new UploadMemory({ totalBytes: 1_000, perWorkspaceBytes: 1_000 });
    const gone = exchange(500);
    gone.close();
    memory.hold(gone.request, gone.response, 'ws_a', LIMIT);
    expect(memory.heldBytes).toBe(0);
  });
});
