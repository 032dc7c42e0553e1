/**
 * LoRA adapters on the llama.cpp engine. node-llama-cpp binds an adapter to a context, so each
 * adapter gets a runtime of its own (the base model's weights shared, a context applying the
 * adapter: LlamaRuntime.withAdapter) and the base context stays as it is. At most max_loras of
 * them live at once; the least recently used one no job holds is evicted, which disposes its
 * context and frees the adapter's weights. An adapter's GGUF is fetched and checked
 * (adapter-store.ts), then checked against the base model (llama-adapter-check.ts) before
 * llama.cpp ever reads it: a malformed file fails its jobs with adapter_load_failed and the
 * agent keeps serving.
 */
import fs from 'node:fs';
import type { AdapterRef } from '../../proto/worker/v1/index';
import type { LoraCapacity } from '../engines/adapter-options';
import { adapterLoadFailed } from '../engines/adapter-failure';
import { AdapterSlots, type AdapterLease } from '../engines/adapter-slots';
import type { AdapterStore } from '../engines/adapter-store';
import { baseModelTensors, checkLlamaAdapter, type BaseModelTensors } from './llama-adapter-check';
import { firstLine } from './llama-backend';
import { loadedLoraCount, type LlamaRuntime } from './llama-runtime';

interface AdapterRuntime {
  readonly runtime: LlamaRuntime;
  readonly key: string;
}

export class LlamaAdapters {
  readonly slots: AdapterSlots<AdapterRuntime>;
  private base: BaseModelTensors | undefined;
  /** Adapter contexts alive now (created and not yet disposed). */
  liveContexts = 0;

  constructor(
    capacity: LoraCapacity,
    private readonly store: AdapterStore,
    private readonly baseRuntime: () => LlamaRuntime | null,
    private readonly threads: number,
  ) {
    // A context is the only tier: no host-memory copies to count.
    this.slots = new AdapterSlots<AdapterRuntime>({ ...capacity, maxCpuLoras: 0 }, {
      load: (ref) => this.load(ref),
      unload: async (_name, held) => {
        try {
          await held.runtime.close();
        } finally {
          this.liveContexts -= 1;
          this.store.release(held.key);
        }
      },
    });
  }

  /** The runtime of the job's adapter, held until the lease is released. */
  async acquire(ref: AdapterRef): Promise<AdapterLease<AdapterRuntime>> {
    return await this.slots.acquire(ref);
  }

  close(): Promise<void> {
    return this.slots.close();
  }

  /** Adapters whose weights llama.cpp holds now (an eviction frees them); null when this node-llama-cpp does not say or no model is loaded. */
  heldWeights(): number | null {
    const base = this.baseRuntime();
    return base ? loadedLoraCount(base.model) : null;
  }

  private async load(ref: AdapterRef): Promise<AdapterRuntime> {
    const label = ref.displayName || ref.name;
    const base = this.baseRuntime();
    if (!base) throw adapterLoadFailed('invalid', 'the llama.cpp model is not loaded');
    if (ref.format !== 'ADAPTER_FORMAT_GGUF') throw adapterLoadFailed('invalid', `adapter ${label} is not GGUF, the only adapter format llama.cpp loads`);
    const local = await this.store.materialize(ref);
    this.store.hold(local.key);
    try {
      this.base ??= baseModelTensors(base.model);
      checkLlamaAdapter(await fs.promises.readFile(local.path), this.base, this.slots.capacity.maxLoraRank, label);
      const runtime = await base.withAdapter(local.path, ref.scale > 0 ? ref.scale : 1, this.threads).catch((error: Error) => {
        throw adapterLoadFailed('invalid', `adapter ${label}: llama.cpp could not apply it: ${firstLine(error).replaceAll(local.path, '<adapter>')}`, error);
      });
      this.liveContexts += 1;
      return { runtime, key: local.key };
    } catch (error) {
      this.store.release(local.key);
      throw error;
    }
  }
}
