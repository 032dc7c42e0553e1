/**
 * Per-job flow control on the agent (stream-window.ts, job-runner.ts): a streamed job stops
 * reading its engine once a window of chunk bytes is uncredited, only that job stops, credit
 * lets it go on, and an abort frees a job that waits for credit. With the real CPU engine, so
 * the engine side (awaiting the sink before producing more) is the one the agent runs.
 */
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import { silentLogger } from '../../worker-agent/agent-logger';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import type { EventWriter } from '../../worker-agent/event-writer';
import { JobRunner } from '../../worker-agent/job-runner';
import { StreamWindow } from '../../worker-agent/stream-window';

const WINDOW = 64 * 1024;

/** A writer that takes every event at once (a stream that is never saturated) and counts chunk bytes per job. */
function countingWriter(): { writer: EventWriter; events: JobEvent[]; chunkBytes(jobId: string): number } {
  const events: JobEvent[] = [];
  const writer = { send: (event: JobEvent) => { events.push(event); return undefined; } } as unknown as EventWriter;
  const chunkBytes = (jobId: string) => events.filter((event) => event.jobId === jobId && event.chunk)
    .reduce((sum, event) => sum + event.chunk!.data.length, 0);
  return { writer, events, chunkBytes };
}

function streamAssign(jobId: string, body: object, streamWindowBytes = WINDOW): Assign {
  return {
    jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: 0, stream: true, includeUsage: false, model: 'm',
    body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true, ...body })), streamWindowBytes,
  };
}

/** Several event-loop turns: the CPU engine yields every 64 steps, so a job that could go on would. */
async function turns(count = 20): Promise<void> {
  for (let turn = 0; turn < count; turn++) await new Promise((resolve) => setImmediate(resolve));
}

const HUGE = { n: 16, max_tokens: 65_536 };

describe('StreamWindow', () => {
  test('waits once the window is full, resumes when credit brings it below, and fails the wait on close', async () => {
    const window = new StreamWindow(100);
    expect(window.sent(60)).toBeUndefined();
    const full = window.sent(60);
    expect(full).toBeInstanceOf(Promise);
    expect(window.sent(10)).toBe(full);
    window.credit(20);
    let resumed = false;
    void full!.then(() => (resumed = true));
    await turns(1);
    expect(resumed).toBe(false);
    window.credit(20);
    await turns(1);
    expect(resumed).toBe(true);
    const again = window.sent(100)!;
    const reason = new EngineFailure('canceled', 'gone');
    window.close(reason);
    await expect(again).rejects.toBe(reason);
    await expect(window.sent(1)).rejects.toBe(reason);
  });
});

describe('JobRunner with stream windows', () => {
  test('a job stops at its window while another job on the same stream runs to the end; credit lets it go on', async () => {
    const { writer, events, chunkBytes } = countingWriter();
    const runner = new JobRunner(new CpuEngine(), 8, silentLogger);
    runner.assign(streamAssign('slow', HUGE), writer);
    await turns();
    const held = chunkBytes('slow');
    expect(held).toBeGreaterThanOrEqual(WINDOW);
    // At most one engine read past the window: 16 choices' events of one step are far below it.
    expect(held).toBeLessThan(WINDOW + 16 * 1024);
    await turns();
    expect(chunkBytes('slow')).toBe(held);

    runner.assign(streamAssign('quick', { max_tokens: 2_000 }, WINDOW * 16), writer);
    await turns(100);
    expect(events.find((event) => event.jobId === 'quick' && event.completed)).toBeDefined();
    expect(chunkBytes('slow')).toBe(held);

    runner.credit('slow', held);
    await turns();
    expect(chunkBytes('slow')).toBeGreaterThanOrEqual(held + WINDOW);
    expect(chunkBytes('slow')).toBeLessThan(2 * held + 16 * 1024);
    runner.credit('nobody', 1_000_000);
    runner.cancel('slow', 'client_stalled');
  });

  test('a job waiting for credit is canceled at once, with the usage it produced', async () => {
    const { writer, events } = countingWriter();
    const runner = new JobRunner(new CpuEngine(), 8, silentLogger);
    runner.assign(streamAssign('stalled', HUGE), writer);
    await turns();
    runner.cancel('stalled', 'client_stalled');
    await turns(3);
    const failed = events.find((event) => event.jobId === 'stalled' && event.failed)?.failed;
    expect(failed).toMatchObject({ code: 'canceled', message: expect.stringContaining('client_stalled') });
    expect(failed!.usage!.completionTokens).toBeGreaterThan(0);
    expect(runner.inFlight).toBe(0);
  });

  test('without a window (an older control plane) or for a job that is not streamed, nothing waits for credit', async () => {
    const { writer, events, chunkBytes } = countingWriter();
    const runner = new JobRunner(new CpuEngine(), 8, silentLogger);
    runner.assign(streamAssign('unlimited', { max_tokens: 4_000 }, 0), writer);
    runner.assign({ ...streamAssign('plain', { n: 4, max_tokens: 4_000, stream: false }), stream: false }, writer);
    await turns(200);
    expect(events.find((event) => event.jobId === 'unlimited' && event.completed)).toBeDefined();
    expect(chunkBytes('unlimited')).toBeGreaterThan(WINDOW * 4);
    const output = events.find((event) => event.jobId === 'plain' && event.output)?.output;
    expect(output!.data.length).toBeGreaterThan(WINDOW);
    expect(events.find((event) => event.jobId === 'plain' && event.completed)).toBeDefined();
  });
});
