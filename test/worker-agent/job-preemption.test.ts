/**
 * JobPreemption: a batch line's engine time stands still while it is paused, a resume costs the
 * prefill again, and an abort ends it paused or not. And the CPU engine answers a paused line
 * only after it is resumed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';
import { JobPreemption } from '../../worker-agent/job-preemption';
import { engineJob } from './support/engine-harness';

describe('JobPreemption', () => {
  test('time paused does not count, and a resume adds its cost', async () => {
    const preemption = new JobPreemption();
    const started = performance.now();
    const done = preemption.sleep(60, 40, undefined).then(() => performance.now() - started);
    await sleep(20);
    preemption.pause();
    await sleep(100);
    expect(preemption.isPaused).toBe(true);
    preemption.resume();
    // 20 ms ran, 100 paused, then 40 left + 40 of recomputed prefill: ~200 ms in all.
    const took = await done;
    expect(took).toBeGreaterThanOrEqual(195);
    expect(took).toBeLessThan(1_000);
    expect(preemption.times).toBe(1);
  });

  test('a sleep that starts paused waits for the resume', async () => {
    const preemption = new JobPreemption();
    preemption.pause();
    let finished = false;
    const done = preemption.sleep(0, 5, undefined).then(() => { finished = true; });
    await sleep(30);
    expect(finished).toBe(false);
    preemption.resume();
    await done;
    expect(finished).toBe(true);
  });

  test('an abort ends it while paused', async () => {
    const preemption = new JobPreemption();
    const controller = new AbortController();
    const done = preemption.sleep(50, 10, controller.signal);
    preemption.pause();
    controller.abort(new Error('batch cancelled'));
    await expect(done).rejects.toThrow('batch cancelled');
  });
});

describe('CpuEngine with a preempted batch line', () => {
  test('answers only after the line is resumed', async () => {
    const engine = new CpuEngine({ ttftMs: 10, tokensPerSecond: 1_000, testControls: false });
    expect(engine.batchPreemption).toBe('suspend');
    const preemption = new JobPreemption();
    const outputs: Buffer[] = [];
    const sink = { chunk: () => undefined, output: (data: Buffer) => { outputs.push(data); return undefined; } };
    const job = { ...engineJob({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }), batch: true };
    const run = engine.run(job, sink, new JobCancellation(), preemption);
    preemption.pause();
    await sleep(80);
    expect(outputs).toHaveLength(0);
    preemption.resume();
    const result = await run;
    expect(result.usage.completionTokens).toBe(5);
    expect(outputs).toHaveLength(1);
  });
});
