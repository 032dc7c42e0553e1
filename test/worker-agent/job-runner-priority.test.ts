/**
 * JobRunner's owner-first queue (shared serving): with priority scheduling a waiting owner job
 * always starts before a waiting guest job; without it the queue is the one FIFO it always was
 * and guest jobs are refused.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import type { AgentLogger } from '../../worker-agent/agent-logger';
import { silentLogger } from '../../worker-agent/agent-logger';
import type { Engine, EngineJob, EngineResult } from '../../worker-agent/engines/engine';
import type { EventWriter } from '../../worker-agent/event-writer';
import { JobRunner } from '../../worker-agent/job-runner';

const RESULT: EngineResult = { usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 }, finishReason: 'stop', usageEstimated: false };

/** An engine whose calls finish only when the test says so; records the order calls start in. */
function gatedEngine(): { engine: Engine; started: string[]; finish(jobId: string): void; fail(jobId: string, error: unknown): void } {
  const started: string[] = [];
  const pending = new Map<string, { resolve: (result: EngineResult) => void; reject: (error: unknown) => void }>();
  const engine = {
    kind: 'fake', version: '1', url: '', priorityCapable: true,
    start: async () => {}, models: () => [], health: () => ({ status: 'ENGINE_HEALTH_HEALTHY' as const, detail: '' }), close: async () => {},
    run: (job: EngineJob) => new Promise<EngineResult>((resolve, reject) => {
      started.push(job.jobId);
      pending.set(job.jobId, { resolve, reject });
    }),
  } satisfies Engine;
  const settle = (jobId: string) => {
    const call = pending.get(jobId);
    if (!call) throw new Error(`${jobId} is not running (started: ${started.join(', ')})`);
    pending.delete(jobId);
    return call;
  };
  return { engine, started, finish: (jobId) => settle(jobId).resolve(RESULT), fail: (jobId, error) => settle(jobId).reject(error) };
}

function recordingWriter(): { writer: EventWriter; events: JobEvent[] } {
  const events: JobEvent[] = [];
  const writer = { send: (event: JobEvent) => { events.push(event); return undefined; } } as unknown as EventWriter;
  return { writer, events };
}

function assign(jobId: string, guest = false): Assign {
  return {
    jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: 0, stream: false, includeUsage: false, model: 'm',
    body: Buffer.from('{"messages":[{"role":"user","content":"hi"}]}'), ...(guest ? { guest: true } : {}),
  };
}

/** Lets the runner's promise callbacks (finish → next job) run. */
const settled = () => new Promise((resolve) => setImmediate(resolve));

/** Finishes whatever runs, one at a time, until `count` jobs have started. */
async function drainInOrder(fake: ReturnType<typeof gatedEngine>, count: number): Promise<string[]> {
  for (let index = 0; index < count; index += 1) {
    await settled();
    fake.finish(fake.started[index]);
  }
  await settled();
  return fake.started;
}

describe('JobRunner with priority scheduling (a shared replica)', () => {
  test('a waiting owner job starts before guest jobs that waited longer', async () => {
    const fake = gatedEngine();
    const { writer, events } = recordingWriter();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.setPriorityScheduling(true);
    runner.assign(assign('owner_running'), writer);
    runner.assign(assign('guest_1', true), writer);
    runner.assign(assign('guest_2', true), writer);
    runner.assign(assign('owner_late'), writer);
    expect(runner.inFlight).toBe(1);
    expect(runner.queued).toBe(3);
    expect(events.filter((event) => event.accepted).map((event) => event.jobId)).toEqual(['guest_1', 'guest_2', 'owner_late']);
    expect(await drainInOrder(fake, 4)).toEqual(['owner_running', 'owner_late', 'guest_1', 'guest_2']);
    expect(events.filter((event) => event.completed).map((event) => event.jobId)).toEqual(['owner_running', 'owner_late', 'guest_1', 'guest_2']);
    expect(runner.queued).toBe(0);
  });

  test('owner jobs keep FIFO among themselves, and so do guests; a freed slot goes to the oldest owner', async () => {
    const fake = gatedEngine();
    const { writer } = recordingWriter();
    const runner = new JobRunner(fake.engine, 2, silentLogger);
    runner.setPriorityScheduling(true);
    for (const [jobId, guest] of [['o1', false], ['g1', true], ['g2', true], ['o2', false], ['g3', true], ['o3', false], ['o4', false]] as const) {
      runner.assign(assign(jobId, guest), writer);
    }
    // o1 and g1 took the two free slots at once: the queue orders only jobs that must wait.
    expect(fake.started).toEqual(['o1', 'g1']);
    expect(runner.queued).toBe(5);
    fake.finish('g1');
    await settled();
    expect(fake.started).toEqual(['o1', 'g1', 'o2']);
    fake.finish('o1');
    fake.finish('o2');
    await settled();
    expect(fake.started).toEqual(['o1', 'g1', 'o2', 'o3', 'o4']);
    fake.finish('o3');
    fake.finish('o4');
    await settled();
    expect(fake.started).toEqual(['o1', 'g1', 'o2', 'o3', 'o4', 'g2', 'g3']);
  });

  test('a canceled waiting guest leaves the guest queue and never starts', async () => {
    const fake = gatedEngine();
    const { writer, events } = recordingWriter();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.setPriorityScheduling(true);
    runner.assign(assign('owner'), writer);
    runner.assign(assign('guest_canceled', true), writer);
    runner.assign(assign('guest_kept', true), writer);
    runner.cancel('guest_canceled', 'client_disconnected');
    expect(runner.queued).toBe(1);
    expect(events.find((event) => event.jobId === 'guest_canceled' && event.failed)?.failed?.code).toBe('canceled');
    expect(await drainInOrder(fake, 2)).toEqual(['owner', 'guest_kept']);
  });
});

describe('JobRunner without priority scheduling', () => {
  test('one FIFO queue, as before shared serving', async () => {
    const fake = gatedEngine();
    const { writer } = recordingWriter();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    for (const jobId of ['a', 'b', 'c', 'd']) runner.assign(assign(jobId), writer);
    expect(runner.queued).toBe(3);
    expect(await drainInOrder(fake, 4)).toEqual(['a', 'b', 'c', 'd']);
  });

  test('a guest job fails at once with invalid_job and never reaches the engine or the queue', async () => {
    const fake = gatedEngine();
    const { writer, events } = recordingWriter();
    const runner = new JobRunner(fake.engine, 1, silentLogger);
    runner.assign(assign('owner'), writer);
    runner.assign(assign('guest', true), writer);
    expect(events.filter((event) => event.jobId === 'guest')).toEqual([
      { jobId: 'guest', failed: expect.objectContaining({ code: 'invalid_job', message: 'this replica does not serve guests' }) },
    ]);
    expect(runner.queued).toBe(0);
    // Switching it off again (a later Welcome without it) refuses guests again.
    runner.setPriorityScheduling(true);
    runner.setPriorityScheduling(false);
    runner.assign(assign('guest_again', true), writer);
    expect(events.find((event) => event.jobId === 'guest_again')?.failed?.code).toBe('invalid_job');
    expect(await drainInOrder(fake, 1)).toEqual(['owner']);
  });
});

describe('JobRunner logs of unexpected engine errors', () => {
  // Short: V8 quotes a short input whole, a long one only around the bad token.
  const MARKER = 'MRK-7d1f';

  /** A real pino logger at trace level, writing into a string. */
  function capturingLogger(): { logger: AgentLogger; output: () => string } {
    let output = '';
    const destination = new Writable({ write(chunk, _encoding, callback) { output += chunk.toString(); callback(); } });
    return { logger: pino({ level: 'trace' }, destination), output: () => output };
  }

  // V8's JSON.parse errors quote the input they choke on: the kind of message that carries a prompt.
  const quotingError = () => {
    try {
      JSON.parse(`{"c": ${MARKER}}`);
    } catch (error) {
      return new Error('engine adapter broke', { cause: error });
    }
    throw new Error('JSON.parse accepted invalid JSON');
  };

  test('the quoting error does quote the marker (else the test below proves nothing)', () => {
    expect(String((quotingError().cause as Error).message)).toContain(MARKER);
  });

  test.each([
    ['an owner job: the error is logged whole (the control that the marker would show)', false, true],
    ['a guest job: only its id and the error name, never the message or cause', true, false],
  ])('%s', async (_name, guest, markerLogged) => {
    const fake = gatedEngine();
    const { writer, events } = recordingWriter();
    const { logger, output } = capturingLogger();
    const runner = new JobRunner(fake.engine, 1, logger);
    runner.setPriorityScheduling(true);
    runner.assign(assign('job_x', guest), writer);
    fake.fail('job_x', quotingError());
    await settled();
    expect(events.find((event) => event.failed)?.failed?.code).toBe('engine_error');
    expect(output()).toContain('engine call failed unexpectedly');
    expect(output()).toContain('job_x');
    expect(output().includes(MARKER)).toBe(markerLogged);
  });
});
