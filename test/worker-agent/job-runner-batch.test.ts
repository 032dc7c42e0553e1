/**
 * JobRunner and batch lines (`Assign.batch`): the control plane sends them only into idle
 * slots, so they should never wait; one that does waits behind every waiting owner and guest.
 */
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import { silentLogger } from '../../worker-agent/agent-logger';
import type { Engine, EngineJob, EngineResult } from '../../worker-agent/engines/engine';
import type { EventWriter } from '../../worker-agent/event-writer';
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
