import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS } from '../../worker-agent/engines/cpu-engine-options';
import type { AdapterRef } from '../../proto/worker/v1/index';
import { engineJob, runEngine, sseEvents, streamedText } from './support/engine-harness';

const body = { messages: [{ role: 'user', content: 'Write about adapters.' }], max_tokens: 12 };

function ref(id: string, revision = 1): AdapterRef {
  return { name: `${id}.r${revision}`, displayName: `support-${id}`, format: 'ADAPTER_FORMAT_PEFT_TAR', source: '', sha256: '', sizeBytes: 0, rank: 8, scale: 0 };
}

function engine(maxLoras: number, loadMs = 0): CpuEngine {
  return new CpuEngine(DEFAULT_CPU_ENGINE_OPTIONS, undefined, { capacity: { maxLoras, maxCpuLoras: 0, maxLoraRank: 64 }, loadMs });
}

async function answer(cpu: CpuEngine, adapter?: AdapterRef, extra: Record<string, unknown> = {}) {
  const run = await runEngine(cpu, engineJob({ ...body, ...extra }, { adapter }));
  if (run.error) throw run.error;
  return JSON.parse(run.outputs[0].data.toString('utf8')) as { model: string; choices: Array<{ message: { content: string } }> };
}

describe('the CPU engine with LoRA adapters (simulated)', () => {
  it('answers differently per adapter, the same for the same adapter, and names the adapter as the client did', async () => {
    const cpu = engine(4);
    const base = await answer(cpu);
    const first = await answer(cpu, ref('ad_a'));
    const second = await answer(cpu, ref('ad_b'));
    expect(base.model).toBe('test-model');
    expect(first.model).toBe('support-ad_a');
    expect(second.model).toBe('support-ad_b');
    const texts = [base, first, second].map((reply) => reply.choices[0].message.content);
    expect(new Set(texts).size).toBe(3);
    expect((await answer(cpu, ref('ad_a'))).choices[0].message.content).toBe(texts[1]);
    // A new revision is other weights: another answer.
    expect((await answer(cpu, ref('ad_a', 2))).choices[0].message.content).not.toBe(texts[1]);
    // The request's seed still varies the answer under one adapter.
    expect((await answer(cpu, ref('ad_a'), { seed: 7 })).choices[0].message.content).not.toBe(texts[1]);
  });

  it('streams under the adapter\'s name too', async () => {
    const cpu = engine(2);
    const run = await runEngine(cpu, engineJob({ ...body, stream: true }, { adapter: ref('ad_s') }));
    const events = sseEvents(run.text).filter((event) => event !== '[DONE]') as Array<Record<string, any>>;
    expect(events.length).toBeGreaterThan(1);
    expect(events.every((event) => event.model === 'support-ad_s')).toBe(true);
    expect(streamedText(events)).toBe((await answer(cpu, ref('ad_s'))).choices[0].message.content);
  });

  it('takes its simulated load time once per adapter, showing LOADING meanwhile, and evicts the least recently used beyond max_loras', async () => {
    const cpu = engine(2, 50);
    const concurrent = Promise.all([answer(cpu, ref('ad_1')), answer(cpu, ref('ad_1')), answer(cpu, ref('ad_1'))]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(cpu.adapters!.snapshot()).toEqual([expect.objectContaining({ name: 'ad_1.r1', state: 'ADAPTER_STATE_LOADING', loadMs: 0 })]);
    await concurrent;
    expect(cpu.loras!.loads).toBe(1);
    const [loaded] = cpu.adapters!.snapshot();
    expect(loaded).toMatchObject({ name: 'ad_1.r1', state: 'ADAPTER_STATE_GPU' });
    expect(loaded.loadMs).toBeGreaterThanOrEqual(45);
    await answer(cpu, ref('ad_2'));
    await answer(cpu, ref('ad_1'));
    await answer(cpu, ref('ad_3'));
    // ad_2 was the least recently used of the two held.
    expect(cpu.adapters!.snapshot().map((entry) => entry.name).sort()).toEqual(['ad_1.r1', 'ad_3.r1']);
    expect(cpu.loras!.loads).toBe(3);
    await answer(cpu, ref('ad_2'));
    expect(cpu.loras!.loads).toBe(4);
    expect(cpu.adapters!.capacity).toEqual({ maxLoras: 2, maxCpuLoras: 0, maxLoraRank: 64 });
  });

  it('fails an adapter job with adapter_load_failed when it serves no adapters or the rank is too big, and still serves the base', async () => {
    const none = new CpuEngine(DEFAULT_CPU_ENGINE_OPTIONS, undefined, { capacity: { maxLoras: 0, maxCpuLoras: 0, maxLoraRank: 64 }, loadMs: 0 });
    expect(none.adapters).toBeUndefined();
    const refused = await runEngine(none, engineJob(body, { adapter: ref('ad_x') }));
    expect(refused.error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
    const cpu = engine(2);
    const tooBig = await runEngine(cpu, engineJob(body, { adapter: { ...ref('ad_big'), rank: 128 } }));
    expect(tooBig.error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
    expect((await answer(cpu)).model).toBe('test-model');
  });
});
