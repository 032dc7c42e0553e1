import { booleanOption, integerOption, numberOption, loadOptionFields, optionField, type OptionsOf } from '../option-fields';
import { cpuStartupPlanOption, type CpuStartupPlan } from './cpu-startup';

/** Timing and failure switches of the built-in CPU engine; shared by the agent and the HTTP server. */
export const cpuEngineOptionFields = {
  /** Simulated model download and load at start, in milliseconds, reported as load progress. @default 0 */
  cpuLoadMs: optionField(integerOption(0).default(0), 'WORKER_CPU_LOAD_MS'),
  /**
   * A GPU engine's start-up acted out phase by phase, timed on the heartbeats (cpu-startup.ts):
   * `download=90000,load=30000,warm_up=2000`; `hang` for a phase that never ends, `fail` for an
   * engine that exits there (code 3). Overrides WORKER_CPU_LOAD_MS. @default none
   */
  cpuStartupPhases: optionField(cpuStartupPlanOption().optional(), 'WORKER_STARTUP_PHASES_MS'),
  /** Delay before the first token, in milliseconds. @default 0 */
  cpuTtftMs: optionField(integerOption(0).default(0), 'WORKER_CPU_TTFT_MS'),
  /** Generation speed per choice; 0 emits as fast as possible. @default 0 */
  cpuTokensPerSecond: optionField(numberOption(0).default(0), 'WORKER_CPU_TOKENS_PER_SECOND'),
  /** Fail every request with `engine_error` after this many tokens (tests). @default off */
  cpuFailAfterTokens: optionField(integerOption(0).optional(), 'WORKER_CPU_FAIL_AFTER_TOKENS'),
  /** Kill the whole process with SIGKILL after this many tokens, like an OOM kill (tests). @default off */
  cpuCrashAfterTokens: optionField(integerOption(0).optional(), 'WORKER_CPU_CRASH_AFTER_TOKENS'),
  /** Honour a per-request `cpu_engine: {ttft_ms, tokens_per_second, fail_after_tokens,
   *  crash_after_tokens}` body field. Never enable where clients are untrusted. @default false */
  cpuTestControls: optionField(booleanOption().default(false), 'WORKER_CPU_TEST_CONTROLS'),
  /** Simulated prefill: microseconds per prompt token not served from the prefix cache, added to
   *  the time to first token; prefills queue on one lane per engine (cpu-prefix-cache.ts). @default 0 (none) */
  cpuPrefillMicrosPerToken: optionField(numberOption(0).default(0), 'WORKER_CPU_PREFILL_US_PER_TOKEN'),
  /** Simulated prefix cache size in tokens (blocks of 16, least recently used evicted); cached
   *  prompt tokens are reported as `usage.prompt_tokens_details.cached_tokens`. @default 0 (no cache) */
  cpuPrefixCacheTokens: optionField(integerOption(0).default(0), 'WORKER_CPU_PREFIX_CACHE_TOKENS'),
};

export type CpuEngineOptionValues = OptionsOf<typeof cpuEngineOptionFields>;

/** What one request runs with, after per-request test overrides. */
export interface CpuEngineBehaviour {
  readonly ttftMs: number;
  readonly tokensPerSecond: number;
  readonly failAfterTokens?: number;
  readonly crashAfterTokens?: number;
}

export interface CpuEngineOptions extends CpuEngineBehaviour {
  readonly testControls: boolean;
  /** Simulated model download and load at start (WORKER_CPU_LOAD_MS): four fifths downloading, one fifth loading. */
  readonly loadMs?: number;
  /** The start-up it acts out phase by phase (WORKER_STARTUP_PHASES_MS); overrides `loadMs`. */
  readonly startup?: CpuStartupPlan;
  /** Simulated prefill time per uncached prompt token, in microseconds (cpu-prefix-cache.ts). @default 0 */
  readonly prefillMicrosPerToken?: number;
  /** Simulated prefix cache size in tokens. @default 0 */
  readonly prefixCacheTokens?: number;
}

export const DEFAULT_CPU_ENGINE_OPTIONS: CpuEngineOptions = Object.freeze({ ttftMs: 0, tokensPerSecond: 0, testControls: false });

export function cpuEngineOptionsFrom(values: CpuEngineOptionValues): CpuEngineOptions {
  return Object.freeze({
    ttftMs: values.cpuTtftMs,
    tokensPerSecond: values.cpuTokensPerSecond,
    failAfterTokens: values.cpuFailAfterTokens,
    crashAfterTokens: values.cpuCrashAfterTokens,
    testControls: values.cpuTestControls,
    loadMs: values.cpuLoadMs,
    startup: values.cpuStartupPhases,
    prefillMicrosPerToken: values.cpuPrefillMicrosPerToken,
    prefixCacheTokens: values.cpuPrefixCacheTokens,
  });
}

export function loadCpuEngineOptions(env: NodeJS.ProcessEnv = process.env): CpuEngineOptions {
  return cpuEngineOptionsFrom(loadOptionFields('cpu engine', cpuEngineOptionFields, [], env));
}
