import type { AdapterCandidate, AdapterHoldings } from '../control-plane/placement/adapter-residency';
import type { LoraRequest } from './lora-trace';

/** What one simulated replica is: request slots, adapter slots, and the times its engine takes. */
export interface ServiceModel {
  /** Requests the engine runs at once (the agent's maxConcurrency); more wait in its queue. */
  readonly concurrency: number;
  /** Adapters ready in the engine at once (max_loras). */
  readonly maxLoras: number;
  /** More kept in host memory (max_cpu_loras): an evicted adapter goes there, and comes back by a swap. */
  readonly maxCpuLoras: number;
  readonly prefillMs: number;
  readonly decodeMs: number;
  /** Loading an adapter the replica does not hold (fetch + load into the engine). */
  readonly loadMs: number;
  /** Moving an adapter from host memory into the engine. */
  readonly swapMs: number;
}

/** How the adapter stood on the replica when the request reached it. */
export type ArrivalFit = 'gpu' | 'loading' | 'cpu' | 'miss';

interface GpuAdapter {
  readyAt: number;
  /** Until its last request assigned here ends: the engine cannot evict it while a request uses it. */
  pinnedUntil: number;
  lastUsed: number;
}

/**
 * One simulated replica, greedy in arrival order. A request takes the request slot that frees
 * first; when it gets it, its adapter is ready, loading, or must come in: from host memory (a
 * swap) or from storage (a load), into a free adapter slot or the least recently used one no
 * running request uses (with no more requests at once than adapter slots there always is one,
 * as vLLM's max_loras bounds the adapters of one batch); the slot waits for it (an engine step
 * that loads a LoRA). An adapter evicted goes to host memory when there is room there (LRU).
 * TTFT = start + prefill - arrival.
 */
export class SimulatedReplica {
  private readonly slotFreeAt: number[];
  private readonly ends: number[] = [];
  private readonly gpu = new Map<string, GpuAdapter>();
  /** Host-memory adapters, least recently used first (Map order). */
  private readonly cpu = new Map<string, true>();
  loads = 0;
  swaps = 0;

  constructor(readonly replicaId: string, private readonly model: ServiceModel) {
    this.slotFreeAt = new Array<number>(model.concurrency).fill(0);
  }

  /** Requests sent here and not finished at `now` (running or waiting): what the router counts as its load. */
  loadAt(now: number): number {
    while (this.ends.length > 0 && this.ends[0] <= now) popMin(this.ends);
    return this.ends.length;
  }

  /** What its heartbeat at `now` would report (an adapter whose load is decided but not done: loading). */
  holdings(now: number): AdapterHoldings {
    const gpu: string[] = [];
    const loading: string[] = [];
    for (const [name, adapter] of this.gpu) (adapter.readyAt <= now ? gpu : loading).push(name);
    return { gpu, loading, cpu: [...this.cpu.keys()] };
  }

  candidate(now: number, holdings: AdapterHoldings): AdapterCandidate & { replica: SimulatedReplica } {
    return { replicaId: this.replicaId, load: this.loadAt(now), capacity: this.model.concurrency, maxLoras: this.model.maxLoras, adapters: holdings, replica: this };
  }

  /** Runs the request here; its TTFT and how its adapter stood when it got a slot (null: the base model). */
  run(request: LoraRequest): { ttftMs: number; fit: ArrivalFit | null } {
    const now = request.atMs;
    let slot = 0;
    for (let index = 1; index < this.slotFreeAt.length; index++) if (this.slotFreeAt[index] < this.slotFreeAt[slot]) slot = index;
    const slotAt = Math.max(now, this.slotFreeAt[slot]);
    let start = slotAt;
    let fit: ArrivalFit | null = null;
    let adapter: GpuAdapter | undefined;
    if (request.adapter !== null) {
      ({ adapter, fit } = this.acquire(request.adapter, slotAt));
      start = Math.max(slotAt, adapter.readyAt);
    }
    const end = start + this.model.prefillMs + this.model.decodeMs;
    this.slotFreeAt[slot] = end;
    pushHeap(this.ends, end);
    if (adapter) {
      adapter.pinnedUntil = Math.max(adapter.pinnedUntil, end);
      adapter.lastUsed = Math.max(adapter.lastUsed, start);
    }
    return { ttftMs: start + this.model.prefillMs - now, fit };
  }

  private acquire(name: string, at: number): { adapter: GpuAdapter; fit: ArrivalFit } {
    const held = this.gpu.get(name);
    if (held) return { adapter: held, fit: held.readyAt <= at ? 'gpu' : 'loading' };
    let loadAt = at;
    if (this.gpu.size >= this.model.maxLoras) {
      // The least recently used adapter no running request uses; failing that (more requests at once than slots), the first released.
      let victim: string | null = null;
      let victimEntry: GpuAdapter | null = null;
      let victimFree = false;
      for (const [candidate, entry] of this.gpu) {
        const free = entry.pinnedUntil <= at && entry.readyAt <= at;
        const better = victimEntry === null
          || (free && !victimFree)
          || (free && victimFree && entry.lastUsed < victimEntry.lastUsed)
          || (!free && !victimFree && Math.max(entry.pinnedUntil, entry.readyAt) < Math.max(victimEntry.pinnedUntil, victimEntry.readyAt));
        if (better) {
          victim = candidate;
          victimEntry = entry;
          victimFree = free;
        }
      }
      loadAt = Math.max(at, victimEntry!.pinnedUntil, victimEntry!.readyAt);
      this.gpu.delete(victim!);
      if (this.model.maxCpuLoras > 0) {
        this.cpu.set(victim!, true);
        if (this.cpu.size > this.model.maxCpuLoras) this.cpu.delete(this.cpu.keys().next().value!);
      }
    }
    const inCpu = this.cpu.delete(name);
    if (inCpu) this.swaps++;
    else this.loads++;
    const adapter = { readyAt: loadAt + (inCpu ? this.model.swapMs : this.model.loadMs), pinnedUntil: 0, lastUsed: at };
    this.gpu.set(name, adapter);
    return { adapter, fit: inCpu ? 'cpu' : 'miss' };
  }
}

/** A router: the replica a request goes to among the candidates (built from heartbeats), and why. */
export type SimulatedRouter = (request: LoraRequest, candidates: Array<AdapterCandidate & { replica: SimulatedReplica }>, now: number) => { replica: SimulatedReplica; reason: string };

export interface FleetResult {
  readonly requests: number;
  readonly minutes: number;
  readonly loads: number;
  readonly swaps: number;
  /** Loads from storage while the fleet warmed up (played, not counted above), and that phase's length. */
  readonly cold: { readonly loads: number; readonly minutes: number };
  /** Counted requests whose TTFT exceeded `slowMs` (simulateFleet's argument; 0 when not given). */
  readonly slow: number;
  readonly fits: Record<ArrivalFit, number>;
  readonly reasons: Record<string, number>;
  readonly ttft: { p50: number; p90: number; p99: number };
}

/**
 * Plays the trace on `replicas` fresh replicas: each request's candidates carry load now (the
 * router's own count, as for this server's replicas) and residency as of the last heartbeat
 * (every `heartbeatMs`), as the job router sees them.
 */
export function simulateFleet(trace: readonly LoraRequest[], replicas: number, model: ServiceModel, route: SimulatedRouter, heartbeatMs: number, warmupMs = 0, slowMs = Number.POSITIVE_INFINITY): FleetResult {
  const fleet = Array.from({ length: replicas }, (_, index) => new SimulatedReplica(`rep_sim${index.toString().padStart(2, '0')}`, model));
  let snapshots = fleet.map((replica) => replica.holdings(0));
  let nextBeat = heartbeatMs;
  const fits: Record<ArrivalFit, number> = { gpu: 0, loading: 0, cpu: 0, miss: 0 };
  const reasons: Record<string, number> = {};
  const ttfts: number[] = [];
  let loadsBefore = 0;
  let swapsBefore = 0;
  let counted = 0;
  let slow = 0;
  trace.forEach((request) => {
    const now = request.atMs;
    if (nextBeat <= now) {
      while (nextBeat + heartbeatMs <= now) nextBeat += heartbeatMs;
      snapshots = fleet.map((replica) => replica.holdings(nextBeat));
      nextBeat += heartbeatMs;
    }
    const { replica, reason } = route(request, fleet.map((member, at) => member.candidate(now, snapshots[at])), now);
    // The warm-up (every adapter's first load) is played but not counted.
    if (now < warmupMs) {
      replica.run(request);
      loadsBefore = fleet.reduce((sum, member) => sum + member.loads, 0);
      swapsBefore = fleet.reduce((sum, member) => sum + member.swaps, 0);
      return;
    }
    counted++;
    reasons[reason] = (reasons[reason] ?? 0) + 1;
    const { ttftMs, fit } = replica.run(request);
    ttfts.push(ttftMs);
    if (ttftMs > slowMs) slow++;
    if (fit) fits[fit]++;
  });
  ttfts.sort((a, b) => a - b);
  const at = (quantile: number) => ttfts[Math.min(ttfts.length - 1, Math.floor(quantile * ttfts.length))];
  const minutes = Math.max(0, (trace.at(-1)?.atMs ?? 0) - warmupMs) / 60_000;
  return {
    requests: counted, minutes, fits, reasons, ttft: { p50: at(0.5), p90: at(0.9), p99: at(0.99) }, slow,
    cold: { loads: loadsBefore, minutes: Math.min(warmupMs, trace.at(-1)?.atMs ?? 0) / 60_000 },
    loads: fleet.reduce((sum, replica) => sum + replica.loads, 0) - loadsBefore, swaps: fleet.reduce((sum, replica) => sum + replica.swaps, 0) - swapsBefore,
  };
}

function pushHeap(heap: number[], value: number): void {
  heap.push(value);
  let index = heap.length - 1;
  while (index > 0) {
    const parent = (index - 1) >> 1;
    if (heap[parent] <= value) break;
    heap[index] = heap[parent];
    index = parent;
  }
  heap[index] = value;
}

function popMin(heap: number[]): number {
  const top = heap[0];
  const last = heap.pop()!;
  if (heap.length > 0) {
    let index = 0;
    for (;;) {
      const left = 2 * index + 1;
      if (left >= heap.length) break;
      const child = left + 1 < heap.length && heap[left + 1] < heap[left] ? left + 1 : left;
      if (heap[child] >= last) break;
      heap[index] = heap[child];
      index = child;
    }
    heap[index] = last;
  }
  return top;
}
