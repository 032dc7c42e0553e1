/**
 * The gateway's half of flow control (gateway/http/response-flow.ts): bytes count as consumed
 * when the response took them below its high-water mark, or once it drained; a client whose
 * buffered bytes stop leaving is stalled after the timeout, one that reads slowly is not; a
 * producer that ignores its window is stopped at the buffer limit; a written-out body is
 * watched until it is flushed.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { ResponseFlow } from '../../gateway/http/response-flow';

const STALL_MS = 1_000;
const LIMIT = 10_000;

/** What ResponseFlow uses of a ServerResponse: write's verdict and the bytes still buffered are the test's to set. */
class FakeResponse extends EventEmitter {
  writableLength = 0;
  destroyed = false;
  accepts = true;
  ended = false;

  write(data: Buffer): boolean {
    this.writableLength += data.length;
    return this.accepts;
  }

  end(data?: Buffer | string): void {
    if (data !== undefined) this.writableLength += Buffer.byteLength(data);
    this.ended = true;
  }

  /** The client read `bytes` from the socket. */
  flush(bytes: number): void {
    this.writableLength = Math.max(0, this.writableLength - bytes);
  }
}

function flowOf(response: FakeResponse) {
  const consumed: number[] = [];
  const stalls: string[] = [];
  const flow = new ResponseFlow(response as unknown as ServerResponse, { stallTimeoutMs: STALL_MS, maxBufferedBytes: LIMIT }, {
    consumed: (bytes) => consumed.push(bytes),
    stalled: (why) => stalls.push(why),
  });
  return { flow, consumed, stalls };
}

const bytes = (length: number) => Buffer.alloc(length, 'x');

describe('ResponseFlow', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  test('bytes the response took are consumed at once; past the high-water mark only once it drained', () => {
    const response = new FakeResponse();
    const { flow, consumed, stalls } = flowOf(response);
    flow.write(bytes(100));
    response.flush(100);
    expect(consumed).toEqual([100]);
    response.accepts = false;
    flow.write(bytes(200));
    response.accepts = true;
    flow.write(bytes(300));
    expect(consumed).toEqual([100]);
    response.flush(500);
    response.emit('drain');
    expect(consumed).toEqual([100, 500]);
    jest.advanceTimersByTime(STALL_MS * 5);
    expect(stalls).toEqual([]);
  });

  test('a client whose bytes stop leaving is stalled after the timeout, not before', () => {
    const response = new FakeResponse();
    const { flow, consumed, stalls } = flowOf(response);
    response.accepts = false;
    flow.write(bytes(1_000));
    jest.advanceTimersByTime(STALL_MS - 1);
    expect(stalls).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(stalls).toEqual([expect.stringContaining('no byte reached the client')]);
    expect(consumed).toEqual([]);
    // It is over: a late drain neither credits nor stalls again.
    response.emit('drain');
    flow.write(bytes(LIMIT * 2));
    expect(consumed).toEqual([]);
    expect(stalls).toHaveLength(1);
  });

  test('the timeout runs from the last bytes that left (seen a tenth of a timeout late at most)', () => {
    const response = new FakeResponse();
    const { flow, stalls } = flowOf(response);
    response.accepts = false;
    flow.write(bytes(1_000));
    jest.advanceTimersByTime(600);
    response.flush(100);
    // Not before a whole timeout from then, and at most a tenth of one later.
    jest.advanceTimersByTime(STALL_MS - 1);
    expect(stalls).toEqual([]);
    jest.advanceTimersByTime(STALL_MS / 10 + 1);
    expect(stalls).toHaveLength(1);
  });

  test('a client that reads slowly but steadily is never stalled', () => {
    const response = new FakeResponse();
    const { flow, stalls } = flowOf(response);
    response.accepts = false;
    flow.write(bytes(5_000));
    for (let second = 0; second < 20; second++) {
      response.flush(200);
      jest.advanceTimersByTime(STALL_MS);
    }
    expect(stalls).toEqual([]);
    jest.advanceTimersByTime(STALL_MS * 2);
    expect(stalls).toHaveLength(1);
  });

  test('more than the buffer limit waiting (a producer ignoring its window) is stalled at once', () => {
    const response = new FakeResponse();
    const { flow, stalls } = flowOf(response);
    response.accepts = false;
    flow.write(bytes(LIMIT));
    expect(stalls).toEqual([]);
    flow.write(bytes(1));
    expect(stalls).toEqual([expect.stringContaining(`more than ${LIMIT} bytes`)]);
  });

  test('an end that could not be flushed is watched until it is; one that was is not', () => {
    const response = new FakeResponse();
    const { flow, stalls } = flowOf(response);
    flow.end(bytes(4_000));
    jest.advanceTimersByTime(STALL_MS);
    expect(stalls).toHaveLength(1);

    const flushed = new FakeResponse();
    const quiet = flowOf(flushed);
    flushed.end = function end(this: FakeResponse) { this.ended = true; };
    quiet.flow.end(bytes(4_000));
    expect(jest.getTimerCount()).toBe(0);
  });
});
