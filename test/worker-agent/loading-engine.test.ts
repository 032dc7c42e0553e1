import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS } from '../../worker-agent/engines/cpu-engine-options';
import type { Engine } from '../../worker-agent/engines/engine';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { EngineStartError } from '../../worker-agent/engines/engine-start-error';
import { LoadingEngine } from '../../worker-agent/engines/loading-engine';
import { engineJob, runEngine } from './support/engine-harness';

describe('LoadingEngine', () => {
  test('reports STARTING with stage and whole percent while the model loads, refuses work, then hands over', async () => {
    let changes = 0;
    const engine = new LoadingEngine(new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, loadMs: 200 }), () => { changes += 1; });
    const seen: number[] = [];
    const started = engine.start((percent) => seen.push(percent));
    await new Promise((resolve) => setTimeout(resolve, 60));
    const loading = engine.health();
    expect(loading.status).toBe('ENGINE_HEALTH_STARTING');
    expect(loading.loadPercent).toBeGreaterThan(0);
    expect(loading.loadPercent).toBeLessThan(100);
    expect(loading.detail).toBe(`downloading the model weights: ${loading.loadPercent} %`);
    const refused = await runEngine(engine, engineJob({ messages: [{ role: 'user', content: 'hi' }] }));
    expect(refused.error).toBeInstanceOf(EngineFailure);
    expect((refused.error as EngineFailure).code).toBe('engine_unavailable');

    await started;
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    expect(engine.health()).toEqual({ status: 'ENGINE_HEALTH_HEALTHY', detail: '' });
    // One change per step (20, the first being the stage), and one when loaded.
    expect(changes).toBe(21);
    const ran = await runEngine(engine, engineJob({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }));
    expect(ran.error).toBeUndefined();
    expect(ran.result?.usage.completionTokens).toBe(2);
  });

  test('notifies only when the whole percent or the stage changes', async () => {
    const inner = {
      kind: 'fake', version: '1', url: '', models: () => [], health: () => ({ status: 'ENGINE_HEALTH_HEALTHY', detail: '' }),
      run: async () => { throw new Error('unused'); }, close: async () => {},
      async start(progress?: (percent: number, stage: string) => void) {
        for (const percent of [0.1, 0.2, 0.7, 1.2, 1.9, 2.5]) progress?.(percent, 'loading');
        progress?.(2.6, 'warming up');
      },
    } as unknown as Engine;
    let changes = 0;
    await new LoadingEngine(inner, () => { changes += 1; }).start();
    // The first stage, 0→1 %, 1→2 %, the next stage, and loaded.
    expect(changes).toBe(5);
  });

  test('a failed start propagates and the engine stays STARTING (the agent exits with code 3)', async () => {
    const inner = { kind: 'fake', version: '1', url: '', models: () => [], start: async () => { throw new EngineStartError('no such file'); } } as unknown as Engine;
    const engine = new LoadingEngine(inner);
    await expect(engine.start()).rejects.toBeInstanceOf(EngineStartError);
    expect(engine.health().status).toBe('ENGINE_HEALTH_STARTING');
  });
});
