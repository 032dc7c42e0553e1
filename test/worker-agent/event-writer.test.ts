import { Writable } from 'node:stream';
import type { AgentFrame, JobEvent } from '../../proto/worker/v1/index';
import { EventWriter } from '../../worker-agent/event-writer';

/** A real object-mode stream that takes one frame per `delayMs`, to create backpressure. */
function slowStream(delayMs: number): { stream: Writable; frames: AgentFrame[] } {
  const frames: AgentFrame[] = [];
  const stream = new Writable({
    objectMode: true,
    highWaterMark: 2,
    write(frame: AgentFrame, _encoding, callback) {
      frames.push(frame);
      setTimeout(callback, delayMs);
    },
  });
  return { stream, frames };
}

const chunk = (jobId: string, index: number): JobEvent => ({ jobId, chunk: { data: Buffer.from(`data: ${index}\n\n`) } });
const eventsOf = (frames: AgentFrame[]) => frames.flatMap((frame) => (frame.jobEvent ? [frame.jobEvent] : frame.jobEvents!.events));

describe('EventWriter', () => {
  test('sends one event as jobEvent and events of the same turn as one batch', async () => {
    const { stream, frames } = slowStream(0);
    const writer = new EventWriter(stream);
    writer.send(chunk('a', 0));
    await writer.flushed();
    writer.send(chunk('a', 1));
    writer.send(chunk('b', 0));
    writer.send(chunk('a', 2));
    await writer.flushed();
    expect(frames[0]).toEqual({ jobEvent: chunk('a', 0) });
    expect(frames[1]).toEqual({ jobEvents: { events: [chunk('a', 1), chunk('b', 0), chunk('a', 2)] } });
  });

  test('merges consecutive chunks of one job in a batch, never across jobs or other events', async () => {
    const { stream, frames } = slowStream(0);
    const writer = new EventWriter(stream);
    writer.send(chunk('a', 0));
    writer.send(chunk('a', 1));
    writer.send(chunk('b', 0));
    writer.send(chunk('a', 2));
    writer.send({ jobId: 'a', completed: { finishReason: 'stop' } });
    writer.send(chunk('a', 3));
    await writer.flushed();
    const events = eventsOf(frames);
    expect(events.map((event) => [event.jobId, event.chunk?.data.toString() ?? 'completed'])).toEqual([
      ['a', 'data: 0\n\ndata: 1\n\n'], ['b', 'data: 0\n\n'], ['a', 'data: 2\n\n'], ['a', 'completed'], ['a', 'data: 3\n\n'],
    ]);
  });

  test('hands back a promise while the stream is saturated and keeps the order', async () => {
    const { stream, frames } = slowStream(5);
    const writer = new EventWriter(stream);
    let waits = 0;
    let maxPending = 0;
    for (let index = 0; index < 30; index += 1) {
      const wait = writer.send(chunk('a', index));
      maxPending = Math.max(maxPending, stream.writableLength);
      if (wait) {
        waits += 1;
        await wait;
      } else {
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    await writer.flushed();
    expect(waits).toBeGreaterThan(0);
    expect(maxPending).toBeLessThanOrEqual(3);
    expect(eventsOf(frames).map((event) => event.chunk!.data.toString())).toEqual(Array.from({ length: 30 }, (_, index) => `data: ${index}\n\n`));
  });

  test('close drops queued events and releases waiting engines', async () => {
    const { stream, frames } = slowStream(50);
    const writer = new EventWriter(stream);
    let wait: Promise<void> | undefined;
    for (let index = 0; index < 10 && !wait; index += 1) {
      wait = writer.send(chunk('a', index));
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(wait).toBeDefined();
    writer.send(chunk('a', 99));
    writer.close();
    await wait;
    await writer.flushed();
    expect(eventsOf(frames).some((event) => event.chunk!.data.toString().includes('99'))).toBe(false);
    stream.destroy();
  });

  test('stops handing frames to a saturated stream at the first refused one; the rest follow in order after drain', async () => {
    const frames: AgentFrame[] = [];
    let written = 0;
    const stream = new Writable({
      objectMode: true,
      highWaterMark: 1,
      write(frame: AgentFrame, _encoding, callback) {
        frames.push(frame);
        setTimeout(callback, 20);
      },
    });
    const original = stream.write.bind(stream);
    stream.write = ((frame: AgentFrame) => { written += 1; return original(frame); }) as typeof stream.write;
    const writer = new EventWriter(stream);
    // 600 KB each, of different jobs (never merged): three batches' worth in one turn.
    const big = (jobId: string): JobEvent => ({ jobId, chunk: { data: Buffer.alloc(600 * 1024, jobId) } });
    for (const jobId of ['a', 'b', 'c', 'd', 'e']) writer.send(big(jobId));
    await new Promise((resolve) => setImmediate(resolve));
    expect(written).toBe(1);
    await writer.flushed();
    expect(written).toBe(3);
    expect(eventsOf(frames).map((event) => event.jobId)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});
