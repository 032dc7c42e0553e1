/**
 * LoRA adapters on an OpenAI-compatible HTTP engine, loaded at runtime without a restart:
 * vLLM (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING=True) with `POST /v1/load_lora_adapter`
 * and `/v1/unload_lora_adapter`, SGLang with `POST /load_lora_adapter` and `/unload_lora_adapter`
 * (both take `{lora_name, lora_path}`). The weights are fetched and checked by the agent
 * (adapter-store.ts) and the engine is given the local directory, so the engine host needs no
 * storage credentials; a Hugging Face adapter's repo id is given as is, for the engine to fetch.
 * The engine is asked to hold at most max_loras + max_cpu_loras adapters: beyond that the
 * least recently used one is unloaded (vLLM itself keeps max_loras of them on the GPU and the
 * rest in host memory).
 */
import type { AdapterRef } from '../../proto/worker/v1/index';
import type { LoraCapacity } from './adapter-options';
import { adapterLoadFailed } from './adapter-failure';
import { AdapterSlots, type AdapterLease } from './adapter-slots';
import type { AdapterStore, LocalAdapter } from './adapter-store';
import type { LoraRequestsInfo } from './lora-requests-info';

/** Which runtime-LoRA API the engine speaks. */
export type LoraApiFlavour = 'vllm' | 'sglang';

export interface EngineAnswer {
  readonly status: number;
  readonly body: string;
}

export interface OpenAiAdapterDependencies {
  readonly capacity: LoraCapacity;
  readonly store: AdapterStore;
  /** POSTs JSON to the engine (path under its base URL); rejects when it cannot be reached. */
  readonly post: (path: string, body: unknown) => Promise<EngineAnswer>;
  /** The engine's flavour as last detected (GET /v1/models' `owned_by`). */
  readonly flavour: () => LoraApiFlavour;
}

const PATHS: Record<LoraApiFlavour, { load: string; unload: string }> = {
  vllm: { load: '/v1/load_lora_adapter', unload: '/v1/unload_lora_adapter' },
  sglang: { load: '/load_lora_adapter', unload: '/unload_lora_adapter' },
};

export class OpenAiAdapters {
  readonly slots: AdapterSlots<LocalAdapter | null>;

  constructor(private readonly dependencies: OpenAiAdapterDependencies) {
    this.slots = new AdapterSlots<LocalAdapter | null>(dependencies.capacity, {
      load: (ref) => this.load(ref),
      unload: (name, local) => this.unload(name, local),
    });
  }

  acquire(ref: AdapterRef): Promise<AdapterLease<LocalAdapter | null>> {
    return this.slots.acquire(ref);
  }

  /** The engine answered that it does not know the adapter (it restarted): load it again on the next try. */
  forget(name: string): void {
    this.slots.forget(name);
  }

  /** What vLLM's /metrics says it runs: those adapters are in use, so the last to be unloaded. */
  observe(info: LoraRequestsInfo): void {
    this.slots.touch([...info.running, ...info.waiting]);
  }

  private async load(ref: AdapterRef): Promise<LocalAdapter | null> {
    const label = ref.displayName || ref.name;
    if (ref.format === 'ADAPTER_FORMAT_GGUF') throw adapterLoadFailed('invalid', `adapter ${label} is GGUF, which this engine does not load (a PEFT adapter is needed)`);
    const local = ref.format === 'ADAPTER_FORMAT_HUGGING_FACE' ? null : await this.dependencies.store.materialize(ref);
    if (local) this.dependencies.store.hold(local.key);
    try {
      const flavour = this.dependencies.flavour();
      const answer = await this.dependencies.post(PATHS[flavour].load, { lora_name: ref.name, lora_path: local ? local.path : ref.source });
      // The engine kept it across an agent restart: it is loaded, which is what was asked.
      if (answer.status === 400 && /already (been )?loaded/i.test(answer.body)) return local;
      // No such endpoint: the engine was started without runtime LoRA loading (the agent's --max-loras should then be 0).
      if (answer.status === 404 && !/lora|adapter/i.test(answer.body)) {
        throw adapterLoadFailed('invalid', `adapter ${label}: this replica's engine does not load adapters at runtime (vLLM needs --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)`);
      }
      if (answer.status >= 500) throw adapterLoadFailed('fetch', `adapter ${label}: the engine failed to load it (HTTP ${answer.status})`);
      // The engine's text may hold the local path: only its status is told.
      if (answer.status >= 400) throw adapterLoadFailed('invalid', `adapter ${label}: the engine refused to load it (HTTP ${answer.status}): wrong base model, a rank above its max_lora_rank, or malformed weights`);
      return local;
    } catch (error) {
      if (local) this.dependencies.store.release(local.key);
      if ((error as { code?: string }).code === 'adapter_load_failed') throw error;
      throw adapterLoadFailed('fetch', `adapter ${label}: the engine could not be reached to load it`, error);
    }
  }

  private async unload(name: string, local: LocalAdapter | null): Promise<void> {
    try {
      await this.dependencies.post(PATHS[this.dependencies.flavour()].unload, { lora_name: name });
    } finally {
      if (local) this.dependencies.store.release(local.key);
    }
  }
}
