import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';

/** A deployment's LoRA capacity (docs/adapters.md): what its engines are started with. */
export interface LoraSettings {
  /** Adapters ready in the engine at once per replica (vLLM `--max-loras`); 0 serves none. @default 4 */
  readonly maxLoras: number;
  /**
   * Adapters kept in host memory per replica BEYOND the engine's `maxLoras` (docs/adapters.md):
   * vLLM's `--max-cpu-loras` is the whole host-memory cache, so it gets `maxLoras + maxCpuLoras`.
   * @default 0
   */
  readonly maxCpuLoras: number;
  /** The largest rank the engine accepts (vLLM `--max-lora-rank`: one of its sizes). @default 64 */
  readonly maxLoraRank: number;
}

export const DEFAULT_LORA_SETTINGS: LoraSettings = { maxLoras: 4, maxCpuLoras: 0, maxLoraRank: 64 };
/** vLLM's `--max-lora-rank` choices. */
export const LORA_RANKS = [8, 16, 32, 64, 128, 256] as const;
/**
 * Bounds of the table's CHECKs: far above what one GPU holds, below a typo that would reserve all
 * its memory. `maxCpuLoras` counts beyond `maxLoras`, so any value in its range fits vLLM's rule
 * that its `--max-cpu-loras` (our sum) is at least `--max-loras`.
 */
export const MAX_LORAS = 256;
export const MAX_CPU_LORAS = 4096;

/** `current` with `changes` applied (null or absent: unchanged), checked; a bad value is a 400 naming its field. */
export function loraSettingsOf(changes: Partial<Record<keyof LoraSettings, number | null | undefined>>, current: LoraSettings = DEFAULT_LORA_SETTINGS): LoraSettings {
  const maxLoras = changes.maxLoras ?? current.maxLoras;
  const maxCpuLoras = changes.maxCpuLoras ?? current.maxCpuLoras;
  const maxLoraRank = changes.maxLoraRank ?? current.maxLoraRank;
  if (!Number.isInteger(maxLoras) || maxLoras < 0 || maxLoras > MAX_LORAS) {
    throw new AppError('invalid_request', `maxLoras must be an integer from 0 to ${MAX_LORAS}, got ${quoteValue(maxLoras)}`, { param: 'maxLoras' });
  }
  if (!Number.isInteger(maxCpuLoras) || maxCpuLoras < 0 || maxCpuLoras > MAX_CPU_LORAS) {
    throw new AppError('invalid_request', `maxCpuLoras must be an integer from 0 to ${MAX_CPU_LORAS}, got ${quoteValue(maxCpuLoras)}`, { param: 'maxCpuLoras' });
  }
  if (!(LORA_RANKS as readonly number[]).includes(maxLoraRank)) {
    throw new AppError('invalid_request', `maxLoraRank must be one of ${LORA_RANKS.join(', ')}, got ${quoteValue(maxLoraRank)}`, { param: 'maxLoraRank' });
  }
  return { maxLoras, maxCpuLoras, maxLoraRank };
}

/**
 * The settings as the agent's environment (worker-agent/agent-options.ts reads them). A field a
 * deployment object does not hold (one built in memory before its row was read back, whose
 * column defaults only the database fills) is left out, so the agent uses its own default
 * instead of refusing to start on "undefined".
 */
export function loraAgentEnv(settings: LoraSettings): Record<string, string> {
  const env: Record<string, string> = {};
  const set = (name: string, value: number | null | undefined) => { if (Number.isInteger(value)) env[name] = String(value); };
  set('WORKER_MAX_LORAS', settings.maxLoras);
  set('WORKER_MAX_CPU_LORAS', settings.maxCpuLoras);
  set('WORKER_MAX_LORA_RANK', settings.maxLoraRank);
  return env;
}
