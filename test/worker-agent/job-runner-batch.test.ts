/**
 * JobRunner and batch lines (`Assign.batch`): the control plane sends them only into idle
 * slots, so they should never wait; one that does waits behind every waiting owner and guest.
 * A live job that finds every slot taken takes a line's slot on an engine that can set it aside.
 */
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import { silentLogger } from '../../worker-agent/agent-logger';
import type { Engine, EngineJob, EngineResult } from '../../worker-agent/engines/engine';
import type { EventWriter } from '../../worker-agent/event-writer';
import { JobPreemption } from '../../worker-agent/job-preemption';
import { JobRunner } from '../../worker-agent/job-runner';

const RESULT: EngineResult = { usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, finishReason: 'stop', usageEstimated: false };

function gatedEngine() {
  const started: string[] = [];
  const pending = new Map<string, () => void>();
  const engine = {
    kind: 'fake', version: '1', url: '', priorityCapable: true,
    start: async () => {}, models: () => [], health: () => ({ status: 'ENGINE_HEALTH_HEALTHY' as const, detail: '' }), close: async () => {},
    run: (job: EngineJob) => new Promise<EngineResult>((resolve) => {
      started.push(job.jobId);
      pending.set(job.jobId, () => resolve(RESULT));
    }),
  } satisfies Engine;
  return { engine, started, finish: (jobId: string) => pending.get(jobId)!() };
}

const writer = { send: (_event: JobEvent) => undefined } as unknown as EventWriter;
const assign = (jobId: string, kind: 'owner' | 'guest' | 'batch'): Assign => ({
  jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: 0, stream: false, includeUsage: false, model: 'm', body: Buffer.from('{}'),
  ...(kind === 'guest' ? { guest: true } : kind === 'batch' ? { batch: true } : {}),
});
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('JobRunner with batch lines', () => {
  test.each([
    ['with priority scheduling', true, ['running', 'owner', 'guest', 'batch_1', 'batch_2']],
    ['without it', false, ['running', 'owner', 'batch_1', 'batch_2']],
  ])('%s, a waiting batch line starts after every waiting owner and guest job', async (_name, prioritised, order) => {
    const fake = gatedEngine();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.setPriorityScheduling(prioritised as boolean);
    runner.assign(assign('running', 'owner'), writer);
    runner.assign(assign('batch_1', 'batch'), writer);
    if (prioritised) runner.assign(assign('guest', 'guest'), writer);
    runner.assign(assign('batch_2', 'batch'), writer);
    runner.assign(assign('owner', 'owner'), writer);
    for (let index = 0; index < (order as string[]).length; index++) {
      await settled();
      fake.finish(fake.started[index]);
    }
    await settled();
    expect(fake.started).toEqual(order);
    expect(runner.queued).toBe(0);
  });
});

/** An engine that holds each job until told, and records what it was given to pause lines with. */
function preemptingEngine(batchPreemption: 'suspend' | 'engine' | undefined) {
  const fake = gatedEngine();
  const preemptions = new Map<string, JobPreemption | undefined>();
  const engine: Engine = {
    ...fake.engine,
    ...(batchPreemption ? { batchPreemption } : {}),
    run: (job, sink, cancellation, preemption) => {
      preemptions.set(job.jobId, preemption);
      return new Promise<EngineResult>((resolve, reject) => {
        cancellation.onAbort((reason) => reject(reason));
        void fake.engine.run(job).then(resolve);
      });
    },
  };
  return { ...fake, engine, preemptions };
}

function recordingWriter() {
  const events: JobEvent[] = [];
  return { events, writer: { send: (event: JobEvent) => { events.push(event); return undefined; } } as unknown as EventWriter };
}

describe('JobRunner: a live job takes a batch line\'s slot on an engine that can set it aside', () => {
  test('suspend: the line started last is paused, holds no slot, and resumes in the next slot before a waiting line', async () => {
    const fake = preemptingEngine('suspend');
    const runner = new JobRunner(fake.engine, 2, silentLogger);
    runner.assign(assign('batch_1', 'batch'), writer);
    runner.assign(assign('batch_2', 'batch'), writer);
    runner.assign(assign('batch_3', 'batch'), writer);
    await settled();
    expect(fake.started).toEqual(['batch_1', 'batch_2']);
    expect(runner.queued).toBe(1);

    runner.assign(assign('live', 'owner'), writer);
    await settled();
    // At once, not behind a line: batch_2 (started last) is set aside for it.
    expect(fake.started).toEqual(['batch_1', 'batch_2', 'live']);
    expect(fake.preemptions.get('batch_2')!.isPaused).toBe(true);
    expect(fake.preemptions.get('batch_1')!.isPaused).toBe(false);
    expect(fake.preemptions.get('live')).toBeUndefined();
    expect(runner.inFlight).toBe(2);
    expect(runner.parkedLines).toBe(1);

    fake.finish('live');
    await settled();
    // The parked line takes the slot back; the waiting line still waits.
    expect(fake.preemptions.get('batch_2')!.isPaused).toBe(false);
    expect(fake.preemptions.get('batch_2')!.times).toBe(1);
    expect(runner.parkedLines).toBe(0);
    expect(runner.inFlight).toBe(2);
    expect(runner.queued).toBe(1);
    expect(fake.started).toEqual(['batch_1', 'batch_2', 'live']);

    fake.finish('batch_1');
    await settled();
    expect(fake.started).toEqual(['batch_1', 'batch_2', 'live', 'batch_3']);
  });

  test('a live job waits when live jobs hold every slot; a second live job parks the next line', async () => {
    const fake = preemptingEngine('suspend');
    const runner = new JobRunner(fake.engine, 2, silentLogger);
    runner.assign(assign('batch_1', 'batch'), writer);
    runner.assign(assign('batch_2', 'batch'), writer);
    runner.assign(assign('live_1', 'owner'), writer);
    runner.setPriorityScheduling(true);
    runner.assign(assign('live_2', 'guest'), writer);
    runner.assign(assign('live_3', 'owner'), writer);
    await settled();
    expect(fake.started).toEqual(['batch_1', 'batch_2', 'live_1', 'live_2']);
    expect(runner.parkedLines).toBe(2);
    expect(runner.queued).toBe(1);

    fake.finish('live_1');
    await settled();
    // A live job waiting goes before the parked lines.
    expect(fake.started.at(-1)).toBe('live_3');
    expect(runner.parkedLines).toBe(2);
    fake.finish('live_2');
    await settled();
    // The line parked first is resumed first.
    expect(fake.preemptions.get('batch_2')!.isPaused).toBe(false);
    expect(fake.preemptions.get('batch_1')!.isPaused).toBe(true);
  });

  test('engine: the live job goes in beside the line, which the engine keeps running (nothing to pause)', async () => {
    const fake = preemptingEngine('engine');
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.assign(assign('batch_1', 'batch'), writer);
    runner.assign(assign('live', 'owner'), writer);
    await settled();
    expect(fake.started).toEqual(['batch_1', 'live']);
    expect(fake.preemptions.get('batch_1')).toBeUndefined();
    expect(runner.parkedLines).toBe(1);
    expect(runner.inFlight).toBe(1);
    // The parked line finishing first frees nothing: the live job holds the only slot.
    fake.finish('batch_1');
    await settled();
    expect(runner.parkedLines).toBe(0);
    expect(runner.inFlight).toBe(1);
  });

  test('without preemption the live job waits for the line (one line per slot at most)', async () => {
    const fake = preemptingEngine(undefined);
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.assign(assign('batch_1', 'batch'), writer);
    runner.assign(assign('live', 'owner'), writer);
    await settled();
    expect(fake.started).toEqual(['batch_1']);
    expect(fake.preemptions.get('batch_1')).toBeUndefined();
    expect(runner.queued).toBe(1);
    fake.finish('batch_1');
    await settled();
    expect(fake.started).toEqual(['batch_1', 'live']);
  });

  test('a parked line canceled ends once, with its slot count untouched', async () => {
    const fake = preemptingEngine('suspend');
    const { events, writer: recording } = recordingWriter();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.assign(assign('batch_1', 'batch'), recording);
    runner.assign(assign('live', 'owner'), recording);
    await settled();
    runner.cancel('batch_1', 'batch cancelled');
    await settled();
    const terminal = events.filter((event) => event.jobId === 'batch_1' && (event.failed || event.completed));
    expect(terminal).toHaveLength(1);
    expect(terminal[0].failed?.code).toBe('canceled');
    expect(runner.parkedLines).toBe(0);
    expect(runner.inFlight).toBe(1);
    fake.finish('live');
    await settled();
    expect(runner.inFlight).toBe(0);
  });
});
