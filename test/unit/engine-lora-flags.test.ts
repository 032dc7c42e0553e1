/**
 * A deployment's LoRA capacity reaches its engines (providers/kubernetes/engine-container.ts):
 * vLLM starts with LoRA on, its slots and largest rank, and runtime loading allowed; a
 * deployment that serves no adapter (maxLoras 0), or an embedding model, starts without them.
 */
import type { CatalogModel } from '../../control-plane/catalog/catalog';
import { engineContainerFor } from '../../control-plane/providers/kubernetes/engine-container';
import { loraAgentEnv, loraSettingsOf } from '../../control-plane/deployments/lora-settings';
import { AppError } from '../../control-plane/errors/app-error';

const model = (overrides: Partial<CatalogModel> = {}): CatalogModel => ({
  id: 'acme/chat-1', name: 'Chat', modality: 'text', task: 'chat', engine: 'vllm', official: true, gpuMemoryGb: 24,
  inputModalities: ['text'], sizes: [], targetConcurrency: 32, ...overrides,
} as CatalogModel);

describe('LoRA flags of the engine container', () => {
  test('vLLM: --enable-lora with the deployment\'s slots and rank, and runtime updating on; --max-cpu-loras is the whole host cache', () => {
    // 8 in the engine and 32 more in host memory: vLLM's --max-cpu-loras counts all 40 (it must be at least --max-loras).
    const spec = engineContainerFor(model(), 1, false, {}, { maxLoras: 8, maxCpuLoras: 32, maxLoraRank: 128 })!;
    const args = spec.args.join(' ');
    expect(args).toContain('--enable-lora --max-loras 8 --max-cpu-loras 40 --max-lora-rank 128');
    // Fewer beyond the engine's than in it is fine: vLLM still gets at least --max-loras.
    expect(engineContainerFor(model(), 1, false, {}, { maxLoras: 8, maxCpuLoras: 2, maxLoraRank: 64 })!.args.join(' ')).toContain('--max-loras 8 --max-cpu-loras 10 ');
    expect(spec.env).toEqual({ VLLM_ALLOW_RUNTIME_LORA_UPDATING: 'True' });
  });

  test('vLLM without host-memory slots leaves --max-cpu-loras out', () => {
    const args = engineContainerFor(model(), 1, false, {}, { maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 64 })!.args;
    expect(args).toEqual(expect.arrayContaining(['--enable-lora', '--max-loras', '4', '--max-lora-rank', '64']));
    expect(args).not.toContain('--max-cpu-loras');
  });

  test('no adapter capacity, no deployment settings, or an embedding model: no LoRA flags and no env', () => {
    for (const spec of [
      engineContainerFor(model(), 1, false, {}, { maxLoras: 0, maxCpuLoras: 0, maxLoraRank: 64 })!,
      engineContainerFor(model(), 1, false, {})!,
      engineContainerFor(model({ task: 'embedding' }), 1, false, {}, { maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 64 })!,
    ]) {
      expect(spec.args.join(' ')).not.toMatch(/lora/);
      expect(spec.env).toBeUndefined();
    }
  });

  test('SGLang: --enable-lora with its per-batch slots and rank', () => {
    const args = engineContainerFor(model({ engine: 'sglang' }), 1, false, {}, { maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 32 })!.args.join(' ');
    expect(args).toContain('--enable-lora --max-loras-per-batch 4 --max-lora-rank 32');
  });
});

describe('LoRA settings of a deployment', () => {
  test('defaults, and the agent environment they give', () => {
    expect(loraSettingsOf({})).toEqual({ maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 64 });
    // Host-memory slots count beyond the engine's: fewer of them than maxLoras is a valid setting.
    expect(loraSettingsOf({ maxLoras: 8, maxCpuLoras: 4 })).toEqual({ maxLoras: 8, maxCpuLoras: 4, maxLoraRank: 64 });
    expect(loraAgentEnv(loraSettingsOf({ maxLoras: 2 }))).toEqual({ WORKER_MAX_LORAS: '2', WORKER_MAX_CPU_LORAS: '0', WORKER_MAX_LORA_RANK: '64' });
  });

  test('leaves out what a deployment object does not hold (never "undefined", which the agent refuses to start on)', () => {
    // A deployment built in memory before its row is read back has no column defaults yet:
    // llama.cpp replicas of such a deployment never started (their agents exited on the value).
    expect(loraAgentEnv({ maxLoras: undefined, maxCpuLoras: null, maxLoraRank: 32 } as never)).toEqual({ WORKER_MAX_LORA_RANK: '32' });
  });

  test.each([
    [{ maxLoras: -1 }, 'maxLoras'], [{ maxLoras: 1.5 }, 'maxLoras'], [{ maxLoras: 257 }, 'maxLoras'],
    [{ maxCpuLoras: -2 }, 'maxCpuLoras'], [{ maxCpuLoras: 4097 }, 'maxCpuLoras'], [{ maxCpuLoras: 0.5 }, 'maxCpuLoras'],
    [{ maxLoraRank: 48 }, 'maxLoraRank'], [{ maxLoraRank: 512 }, 'maxLoraRank'],
  ])('%j is a 400 naming %s', (changes, param) => {
    let caught: unknown;
    try {
      loraSettingsOf(changes);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(AppError);
    expect((caught as AppError).param).toBe(param);
    expect((caught as AppError).code).toBe('invalid_request');
  });
});
