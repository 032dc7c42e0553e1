/**
 * LoRA adapters on the built-in CPU engine, simulated so fleet tests and benchmarks mean
 * something: a load takes `loadMs` (no weights are fetched: the engine has none), at most
 * `maxLoras` adapters are held (the least recently used idle one is evicted beyond them), and
 * an adapter changes the answer deterministically (its name seeds the text with the request's
 * seed), so two adapters give two answers and one adapter always the same.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { hashText } from '../../common/seeded-random';
import type { AdapterRef } from '../../proto/worker/v1/index';
import type { LoraCapacity } from './adapter-options';
import { AdapterSlots, type AdapterLease } from './adapter-slots';

export interface CpuAdapterOptions {
  readonly capacity: LoraCapacity;
  /** Simulated load time of each adapter. */
  readonly loadMs: number;
}

export class CpuAdapters {
  readonly slots: AdapterSlots<string>;
  /** Loads simulated so far (tests and the fleet benchmark count them). */
  loads = 0;

  constructor(options: CpuAdapterOptions, now: () => number = Date.now) {
    // The engine has no host-memory tier: max_cpu_loras is 0 whatever was asked.
    this.slots = new AdapterSlots<string>({ ...options.capacity, maxCpuLoras: 0 }, {
      load: async (ref) => {
        this.loads += 1;
        if (options.loadMs > 0) await sleep(options.loadMs);
        return ref.name;
      },
      unload: async () => {},
    }, now);
  }

  acquire(ref: AdapterRef): Promise<AdapterLease<string>> {
    return this.slots.acquire(ref);
  }
}

/**
 * The job's body as the adapter answers it: the seed mixed with the adapter's name (its
 * "weights"), and the client's adapter name as the answer's `model`.
 */
export function withAdapter(payload: Record<string, unknown>, ref: AdapterRef): void {
  const seed = typeof payload.seed === 'number' && Number.isSafeInteger(payload.seed) ? payload.seed : 0;
  payload.seed = hashText(`${seed}\u0000${ref.name}`);
  payload.model = ref.displayName || ref.name;
}
