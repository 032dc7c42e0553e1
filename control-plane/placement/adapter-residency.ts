import type { RouteCandidate } from './placement-policy';

/**
 * Which LoRA adapters a replica holds, compact (names only, by state): what the job router reads
 * of this server's replicas (their latest heartbeat) and of peers' (their registry row), and
 * what the scorer ranks them by. Names are `AdapterRef.name` (`<adapter id>.r<revision>`).
 */
export interface AdapterHoldings {
  /** Ready in the engine: a job with it starts without a load. */
  readonly gpu: readonly string[];
  /** In host memory (vLLM `--max-cpu-loras`): a fast swap in. */
  readonly cpu: readonly string[];
  /** Being fetched or loaded: ready before any replica that has not started. */
  readonly loading: readonly string[];
}

export const NO_ADAPTERS: AdapterHoldings = { gpu: [], cpu: [], loading: [] };

/** A replica as adapter placement reads it: its load, its adapter slots, what it holds. */
export interface AdapterCandidate extends RouteCandidate {
  /** Adapters the engine holds ready at once (`Hello.max_loras`); 0: it serves no adapter. */
  readonly maxLoras: number;
  readonly adapters: AdapterHoldings;
}

/** The filter: a replica whose engine was started without adapter slots gets no adapter job. */
export function servesAdapters(candidate: { readonly maxLoras: number }): boolean {
  return candidate.maxLoras > 0;
}

/**
 * Where an adapter stands on a replica, best first: held ready, being loaded, in host memory,
 * a free slot to load it into, or a slot whose least recently used adapter the engine evicts.
 */
export type AdapterFit = 'gpu' | 'loading' | 'cpu' | 'free_slot' | 'evict';

/**
 * The scores of llm-d's lora-load-state scorer (issue 38), with a loading adapter between ready
 * and host memory: its load started before any other replica's could, so it is ready first.
 */
export const ADAPTER_FIT_SCORE: { readonly [fit in AdapterFit]: number } = { gpu: 1, loading: 0.8, cpu: 0.7, free_slot: 0.6, evict: 0.3 };

/** Held (ready, loading or in host memory): a job there loads nothing from storage. */
export function isResident(fit: AdapterFit): boolean {
  return fit === 'gpu' || fit === 'loading' || fit === 'cpu';
}

export function adapterFit(candidate: AdapterCandidate, name: string): AdapterFit {
  const { gpu, cpu, loading } = candidate.adapters;
  if (gpu.includes(name)) return 'gpu';
  if (loading.includes(name)) return 'loading';
  if (cpu.includes(name)) return 'cpu';
  return gpu.length + loading.length < candidate.maxLoras ? 'free_slot' : 'evict';
}

/** One adapter's residency as a heartbeat reports it (`AdapterResidency`; the state as the proto loader decodes it). */
export interface ReportedAdapter {
  readonly name: string;
  readonly state: string | number;
}

/** A name longer than any `<adapter id>.r<revision>` is not ours: dropped, so a peer's row stays small. */
export const MAX_ADAPTER_NAME = 128;

/**
 * A heartbeat's residency, compact and bounded: a replica holds at most `maxLoras` ready or
 * loading and `maxCpuLoras` in host memory, so more than that (an agent's mistake) is cut
 * there, and FAILED adapters are left out (the next job tries the load again anywhere).
 */
export function holdingsOf(reported: readonly ReportedAdapter[] | null | undefined, maxLoras: number, maxCpuLoras: number): AdapterHoldings {
  if (!reported || reported.length === 0 || maxLoras <= 0) return NO_ADAPTERS;
  const gpu: string[] = [];
  const cpu: string[] = [];
  const loading: string[] = [];
  for (const adapter of reported) {
    if (typeof adapter.name !== 'string' || adapter.name.length === 0 || adapter.name.length > MAX_ADAPTER_NAME) continue;
    const state = adapter.state;
    if ((state === 'ADAPTER_STATE_GPU' || state === 1) && gpu.length + loading.length < maxLoras) gpu.push(adapter.name);
    else if ((state === 'ADAPTER_STATE_LOADING' || state === 3) && gpu.length + loading.length < maxLoras) loading.push(adapter.name);
    else if ((state === 'ADAPTER_STATE_CPU' || state === 2) && cpu.length < maxCpuLoras) cpu.push(adapter.name);
  }
  return { gpu, cpu, loading };
}
