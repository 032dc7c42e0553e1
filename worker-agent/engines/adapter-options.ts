/**
 * LoRA adapter options of the agent (docs/adapters.md): how many adapters its engine holds,
 * the largest rank it takes, and where fetched weights are kept. The control plane passes a
 * deployment's `maxLoras` / `maxCpuLoras` / `maxLoraRank` to the agents it spawns under these
 * variable names, so they are part of the contract.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { integerOption, optionField, type OptionsOf } from '../option-fields';

/** The ranks vLLM's `--max-lora-rank` accepts; the deployment setting allows the same. */
export const LORA_RANKS = [8, 16, 32, 64, 128, 256] as const;

/** Where fetched adapters are kept when `--adapter-dir` is unset. */
export function defaultAdapterDir(): string {
  return path.join(os.tmpdir(), 'inference-worker-agent', 'adapters');
}

export const adapterOptionFields = {
  /**
   * Adapters the engine holds ready at once (vLLM `--max-loras`, SGLang `--max-loras-per-batch`,
   * the llama.cpp engine's contexts, the CPU engine's slots); the least recently used one is
   * unloaded beyond it. 0: the replica serves no adapter and the control plane sends it none.
   * Unset: 4 for the built-in engines, 0 for an `openai` engine (vLLM or SGLang must have been
   * started with LoRA on, which the agent cannot see: the operator says so by setting this to
   * the engine's own `--max-loras`). @default 4 (cpu, llama-cpp), 0 (openai)
   */
  maxLoras: optionField(integerOption(0, 1024).optional(), 'WORKER_MAX_LORAS', 'max-loras'),
  /** More adapters kept in host memory beyond maxLoras (vLLM's `--max-cpu-loras` is their sum); only the openai engine has such a tier. @default 0 */
  maxCpuLoras: optionField(integerOption(0, 100_000).default(0), 'WORKER_MAX_CPU_LORAS', 'max-cpu-loras'),
  /** The largest LoRA rank loaded (vLLM `--max-lora-rank`); an adapter of a higher rank fails its jobs with adapter_load_failed. @default 64 */
  maxLoraRank: optionField(
    z.coerce.number().int().refine((rank) => (LORA_RANKS as readonly number[]).includes(rank), `must be one of ${LORA_RANKS.join(', ')}`).default(64),
    'WORKER_MAX_LORA_RANK', 'max-lora-rank'),
  /** Directory fetched adapters are cached in, by checksum. @default <tmp>/inference-worker-agent/adapters */
  adapterDir: optionField(z.string().min(1).optional(), 'WORKER_ADAPTER_DIR', 'adapter-dir'),
  /** Disk the adapter cache may use, in MiB; the least recently used files beyond it are deleted (never one in use). @default 20480 */
  adapterDirMaxMb: optionField(integerOption(1).default(20_480), 'WORKER_ADAPTER_DIR_MAX_MB'),
  /** How long fetching an adapter may take, in milliseconds. @default 300000 */
  adapterFetchTimeoutMs: optionField(integerOption(100).default(300_000), 'WORKER_ADAPTER_FETCH_TIMEOUT_MS'),
  /** The built-in CPU engine's simulated adapter load time, in milliseconds. @default 150 */
  cpuLoraLoadMs: optionField(integerOption(0, 600_000).default(150), 'WORKER_CPU_LORA_LOAD_MS', 'cpu-lora-load-ms'),
};

export type AdapterOptionValues = OptionsOf<typeof adapterOptionFields>;

/** Adapters an engine of `engineKind` holds when `--max-loras` is unset (see `maxLoras`). */
export const DEFAULT_MAX_LORAS = { builtIn: 4, openai: 0 } as const;

/** What a replica can hold, as its Hello says (`max_loras` 0: no adapters). */
export interface LoraCapacity {
  readonly maxLoras: number;
  readonly maxCpuLoras: number;
  readonly maxLoraRank: number;
}
