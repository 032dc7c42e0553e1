/**
 * The adapters one engine holds, whatever the engine: loads them once however many jobs ask at
 * the same time (one load in flight per adapter), keeps at most `capacity` of them (the least
 * recently used one that no running job uses is unloaded beyond it), remembers failures until
 * the next job tries again, and reports it all as `Heartbeat.adapters` (worker.proto
 * AdapterResidency). Engines give it how to load and unload (an AdapterLoader); the agent
 * reads `snapshot()` on every heartbeat and is told of every state change (`onChange`) to send
 * one early.
 */
import type { AdapterRef, AdapterResidency, AdapterState } from '../../proto/worker/v1/index';
import type { LoraCapacity } from './adapter-options';
import { adapterLoadFailed, asAdapterFailure } from './adapter-failure';

export interface AdapterLoader<Handle> {
  /** Makes the adapter usable by the engine; throws adapter_load_failed (adapter-failure.ts). */
  load(ref: AdapterRef): Promise<Handle>;
  /** Frees it (the engine unloads it, the context is disposed, the files may go). */
  unload(name: string, handle: Handle): Promise<void>;
}

/** What `Engine.adapters` exposes to the agent: capacity for Hello, residency for heartbeats. */
export interface AdapterResidencyView {
  readonly capacity: LoraCapacity;
  snapshot(): AdapterResidency[];
  onChange(listener: () => void): void;
  /** Told of each load, unload and failure (the agent logs them: adapter-log.ts). */
  onEvent(listener: (event: AdapterEvent) => void): void;
}

/**
 * One adapter's load, unload or failure. Names only (the engine's `<id>.r<revision>` and the
 * client's), never its source: a presigned URL is a credential, a path says too much.
 */
export type AdapterEvent =
  | { readonly kind: 'loaded'; readonly name: string; readonly displayName: string; readonly loadMs: number }
  | { readonly kind: 'failed'; readonly name: string; readonly displayName: string; readonly loadMs: number; readonly reason: string }
  | { readonly kind: 'unloaded'; readonly name: string; readonly displayName: string; readonly why: UnloadCause };

/** Least recently used beyond capacity, the engine no longer holding it, or the engine closing. */
export type UnloadCause = 'evicted' | 'engine_forgot' | 'closing';

/** A job's hold on a loaded adapter: it cannot be unloaded until released. */
export interface AdapterLease<Handle> {
  readonly handle: Handle;
  release(): void;
}

interface Entry<Handle> {
  readonly name: string;
  /** The client's name (AdapterRef.display_name), for the agent's log. */
  readonly displayName: string;
  state: 'loading' | 'ready' | 'failed';
  handle?: Handle;
  loading?: Promise<Handle>;
  loadMs: number;
  error: string;
  lastUsed: number;
  /** Order of last use (the clock's milliseconds tie): what eviction and the GPU/CPU tiers go by. */
  useOrder: number;
  users: number;
}

/** Failed adapters remembered for the heartbeat (the most recent ones); older ones are dropped. */
const MAX_FAILED_SHOWN = 16;

export class AdapterSlots<Handle> implements AdapterResidencyView {
  private readonly entries = new Map<string, Entry<Handle>>();
  private readonly listeners: Array<() => void> = [];
  private readonly eventListeners: Array<(event: AdapterEvent) => void> = [];
  /** Unloads in progress: counted by tests and the bench, awaited by `close`. */
  private readonly unloading = new Set<Promise<void>>();
  private uses = 0;

  constructor(
    readonly capacity: LoraCapacity,
    private readonly loader: AdapterLoader<Handle>,
    private readonly now: () => number = Date.now,
  ) {}

  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  onEvent(listener: (event: AdapterEvent) => void): void {
    this.eventListeners.push(listener);
  }

  /**
   * The adapter loaded and held for one job: loads it when not held (jobs asking meanwhile wait
   * for the same load), refuses it when it cannot be (adapter_load_failed). Release the lease
   * when the job ends.
   */
  async acquire(ref: AdapterRef): Promise<AdapterLease<Handle>> {
    if (this.capacity.maxLoras <= 0) throw adapterLoadFailed('invalid', 'this replica serves no adapters (max_loras is 0)');
    if (ref.rank > this.capacity.maxLoraRank) {
      throw adapterLoadFailed('invalid', `adapter ${ref.displayName || ref.name} has rank ${ref.rank}, above this replica's max_lora_rank ${this.capacity.maxLoraRank}`);
    }
    let entry = this.entries.get(ref.name);
    if (!entry || entry.state === 'failed') entry = this.startLoad(ref);
    entry.users += 1;
    this.used(entry);
    try {
      const handle = entry.state === 'ready' ? entry.handle as Handle : await (entry.loading as Promise<Handle>);
      let released = false;
      const held = entry;
      return {
        handle,
        release: () => {
          if (released) return;
          released = true;
          held.users -= 1;
          this.used(held);
          this.evictBeyondCapacity();
        },
      };
    } catch (error) {
      entry.users -= 1;
      throw error;
    }
  }

  /** Adapters the engine says it runs (vLLM's `vllm:lora_requests_info`): used now, so the last to go. */
  touch(names: Iterable<string>): void {
    const now = this.now();
    for (const name of [...names]) {
      const entry = this.entries.get(name);
      if (entry?.state === 'ready') this.used(entry, now);
    }
  }

  /** The engine no longer holds it (it restarted, or answered that it does not know it): the next job loads it again. */
  forget(name: string): void {
    const entry = this.entries.get(name);
    if (entry?.state !== 'ready') return;
    this.entries.delete(name);
    // Its files (and the engine's record, if any is left) are let go as for an eviction.
    this.unload(entry, 'engine_forgot');
    this.changed();
  }

  /** Adapters loaded now. */
  get loadedCount(): number {
    let count = 0;
    for (const entry of this.entries.values()) if (entry.state === 'ready') count += 1;
    return count;
  }

  snapshot(): AdapterResidency[] {
    const ready = [...this.entries.values()].filter((entry) => entry.state === 'ready').sort((a, b) => b.useOrder - a.useOrder);
    // The engine's own LRU keeps the most recent in its fast tier: the first max_loras are ready
    // on the device, the rest (vLLM --max-cpu-loras) in host memory.
    const tierOf = new Map(ready.map((entry, index) => [entry, (index < this.capacity.maxLoras ? 'ADAPTER_STATE_GPU' : 'ADAPTER_STATE_CPU') as AdapterState]));
    return [...this.entries.values()].map((entry) => ({
      name: entry.name,
      state: entry.state === 'loading' ? 'ADAPTER_STATE_LOADING' : entry.state === 'failed' ? 'ADAPTER_STATE_FAILED' : tierOf.get(entry) as AdapterState,
      loadMs: entry.state === 'loading' ? 0 : entry.loadMs,
      error: entry.error,
      lastUsedUnixMs: entry.lastUsed,
    }));
  }

  /** Unloads everything (the engine is closing). */
  async close(): Promise<void> {
    const loaded = [...this.entries.values()].filter((entry) => entry.state === 'ready');
    this.entries.clear();
    for (const entry of loaded) this.unload(entry, 'closing');
    await Promise.all([...this.unloading]);
  }

  private startLoad(ref: AdapterRef): Entry<Handle> {
    const entry: Entry<Handle> = { name: ref.name, displayName: ref.displayName || ref.name, state: 'loading', loadMs: 0, error: '', lastUsed: this.now(), useOrder: ++this.uses, users: 0 };
    const startedAt = this.now();
    entry.loading = this.loader.load(ref).then(
      (handle) => {
        entry.state = 'ready';
        entry.handle = handle;
        entry.loading = undefined;
        entry.loadMs = Math.max(0, Math.round(this.now() - startedAt));
        this.emit({ kind: 'loaded', name: entry.name, displayName: entry.displayName, loadMs: entry.loadMs });
        this.changed();
        this.evictBeyondCapacity();
        return handle;
      },
      (error: unknown) => {
        const failure = asAdapterFailure(error, ref.displayName || ref.name);
        entry.state = 'failed';
        entry.loading = undefined;
        entry.loadMs = Math.max(0, Math.round(this.now() - startedAt));
        entry.error = failure.message;
        this.emit({ kind: 'failed', name: entry.name, displayName: entry.displayName, loadMs: entry.loadMs, reason: failure.message });
        this.dropOldFailures();
        this.changed();
        throw failure;
      },
    );
    // Jobs that asked get the rejection; nobody else must see it as unhandled.
    entry.loading.catch(() => undefined);
    this.entries.set(ref.name, entry);
    this.changed();
    return entry;
  }

  /** Beyond capacity (max_loras + max_cpu_loras), unloads the least recently used adapters no job holds. */
  private evictBeyondCapacity(): void {
    const limit = this.capacity.maxLoras + this.capacity.maxCpuLoras;
    const ready = [...this.entries.values()].filter((entry) => entry.state === 'ready');
    let excess = ready.length - limit;
    if (excess <= 0) return;
    // A job running with an adapter keeps it: the engine briefly holds more, and the release evicts.
    for (const entry of ready.filter((candidate) => candidate.users === 0).sort((a, b) => a.useOrder - b.useOrder)) {
      if (excess <= 0) break;
      excess -= 1;
      this.entries.delete(entry.name);
      this.unload(entry, 'evicted');
    }
    this.changed();
  }

  /** Lets the engine free a loaded adapter (tracked until done); it is told once the unload ends, whether or not the engine minded. */
  private unload(entry: Entry<Handle>, why: UnloadCause): void {
    const unload = this.loader.unload(entry.name, entry.handle as Handle).catch(() => undefined).finally(() => {
      this.unloading.delete(unload);
      this.emit({ kind: 'unloaded', name: entry.name, displayName: entry.displayName, why });
    });
    this.unloading.add(unload);
  }

  private dropOldFailures(): void {
    const failed = [...this.entries.values()].filter((entry) => entry.state === 'failed' && entry.users === 0).sort((a, b) => a.useOrder - b.useOrder);
    for (const entry of failed.slice(0, Math.max(0, failed.length - MAX_FAILED_SHOWN))) this.entries.delete(entry.name);
  }

  private used(entry: Entry<Handle>, now = this.now()): void {
    entry.lastUsed = now;
    entry.useOrder = ++this.uses;
  }

  private emit(event: AdapterEvent): void {
    for (const listener of this.eventListeners) listener(event);
  }

  private changed(): void {
    for (const listener of this.listeners) listener();
  }
}
