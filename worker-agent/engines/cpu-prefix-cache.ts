/**
 * A simulated prefix cache and prefill for the CPU engine, so a fleet of CPU replicas behaves
 * like GPU engines do under routing: a prompt whose prefix the replica computed recently starts
 * sooner, and prefills queue behind each other on an overloaded replica.
 *
 * Like vLLM's automatic prefix caching, the prompt (as cpu-tokenizer.ts tokenizes it) is cut
 * into blocks of PREFIX_BLOCK_TOKENS; each full block is keyed by a chain hash (the previous
 * block's key and this block's tokens), so a key names the whole prefix up to it. The chain
 * starts from the request's cache salt (its tenant, cache-tenant.ts), as vLLM hashes
 * `cache_salt` into the first block: two tenants' equal prompts have no key in common, so
 * neither's `cached_tokens` or prefill time says anything of the other's prompts. The cached
 * prefix is the longest run of leading blocks present in an LRU of at most
 * `prefixCacheTokens / 16` blocks. Prefill costs `prefillMicrosPerToken` per uncached token on
 * one prefill lane per engine (a request's prefill waits for the ones before it), after which
 * the prompt's blocks are inserted or refreshed.
 *
 * Off (both options 0, the default) the engine creates none of this and answers as before.
 */
import { createHash } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CpuEngineOptions } from './cpu-engine-options';
import { tokenize } from './cpu-tokenizer';
import type { EngineSignals } from './engine-signals';

/** Tokens per cache block (vLLM's default block size). */
export const PREFIX_BLOCK_TOKENS = 16;

/** Requests the prefix-cache hit rate is computed over. */
export const HIT_RATE_WINDOW = 1_000;

/**
 * The chain keys of a token sequence's full blocks: key i hashes key i−1 and block i's tokens,
 * so two prompts share key i exactly when their first (i+1)·16 tokens are equal and their salts
 * are. A trailing partial block has no key (it is never cached, as in vLLM).
 */
export function blockKeys(tokens: readonly string[], blockTokens = PREFIX_BLOCK_TOKENS, salt = ''): string[] {
  const keys: string[] = [];
  // Marked, so that no salt can pose as a block key (base64 digests never hold ':').
  let previous = salt ? `salt:${salt}` : '';
  for (let start = 0; start + blockTokens <= tokens.length; start += blockTokens) {
    const hash = createHash('sha256').update(previous).update('\u0000');
    for (let index = start; index < start + blockTokens; index += 1) hash.update(tokens[index]).update('\u001f');
    previous = hash.digest('base64');
    keys.push(previous);
  }
  return keys;
}

/** Cache blocks by chain key, least recently used first out, at most `capacity` of them. */
export class PrefixBlockCache {
  /** Map order is recency: the first key is the least recently used. */
  private readonly blocks = new Map<string, true>();

  constructor(readonly capacity: number) {}

  get size(): number {
    return this.blocks.size;
  }

  has(key: string): boolean {
    return this.blocks.has(key);
  }

  /** How many of `keys`, from the first, are cached: the cached prefix in blocks. */
  cachedBlocks(keys: readonly string[]): number {
    let count = 0;
    while (count < keys.length && this.blocks.has(keys[count])) count += 1;
    return count;
  }

  /**
   * Adds or refreshes a prompt's blocks. They are touched last block first, so the prompt's
   * head ends up most recent and eviction takes a chain from its tail (vLLM frees a request's
   * blocks in reverse order for the same reason): a shared system prompt outlives the
   * conversations built on it.
   */
  insert(keys: readonly string[]): void {
    if (this.capacity <= 0) return;
    for (let index = keys.length - 1; index >= 0; index -= 1) {
      this.blocks.delete(keys[index]);
      this.blocks.set(keys[index], true);
    }
    for (const oldest of this.blocks.keys()) {
      if (this.blocks.size <= this.capacity) break;
      this.blocks.delete(oldest);
    }
  }
}

/** Time for the prefill lane; tests pass a fake one. */
export interface PrefillClock {
  /** Milliseconds, monotonic. */
  now(): number;
  sleep(milliseconds: number, signal?: AbortSignal): Promise<void>;
}

export const REAL_PREFILL_CLOCK: PrefillClock = {
  now: () => performance.now(),
  sleep: async (milliseconds, signal) => { await sleep(milliseconds, undefined, { signal }); },
};

export interface PrefillSettings {
  /** Simulated prefill time per uncached prompt token, in microseconds; 0 = none. */
  readonly prefillMicrosPerToken: number;
  /** Prefix cache size in tokens (a multiple of 16 is whole blocks); 0 = no cache. */
  readonly prefixCacheTokens: number;
}

export interface PrefillResult {
  readonly promptTokens: number;
  /** Prompt tokens served from the cache: cached blocks × 16, at most the prompt's tokens. */
  readonly cachedTokens: number;
}

/** The simulation for one engine, or undefined when both options are off (the default). */
export function cpuPrefixSimulator(options: Partial<Pick<CpuEngineOptions, 'prefillMicrosPerToken' | 'prefixCacheTokens'>>, clock?: PrefillClock): CpuPrefixSimulator | undefined {
  const settings = { prefillMicrosPerToken: options.prefillMicrosPerToken ?? 0, prefixCacheTokens: options.prefixCacheTokens ?? 0 };
  if (settings.prefillMicrosPerToken <= 0 && settings.prefixCacheTokens <= 0) return undefined;
  return new CpuPrefixSimulator(settings, clock);
}

/** One engine's prefix cache and prefill lane. */
export class CpuPrefixSimulator {
  readonly cache: PrefixBlockCache;
  /** Settles when the last prefill that entered the lane is done (or gave up). */
  private tail: Promise<void> = Promise.resolve();
  /** When the lane's work so far ends in simulated time: a timer firing late does not delay the next prefill. */
  private freeAt = 0;
  private queued = 0;
  private readonly recent: Array<{ prompt: number; cached: number }> = [];
  private recentPromptTokens = 0;
  private recentCachedTokens = 0;

  constructor(private readonly settings: PrefillSettings, private readonly clock: PrefillClock = REAL_PREFILL_CLOCK) {
    this.cache = new PrefixBlockCache(Math.floor(settings.prefixCacheTokens / PREFIX_BLOCK_TOKENS));
  }

  /** Requests whose prefill waits for the lane. */
  get waiting(): number {
    return this.queued;
  }

  /**
   * Prefills `prompts` (a chat's one prompt, or a completions batch): waits its turn on the
   * lane, looks up each prompt's cached prefix, takes `uncached tokens × prefillMicrosPerToken`,
   * then caches the prompts' blocks. Rejects with the signal's reason when aborted (nothing is
   * cached then, and the lane is free at once). `salt`: the request's tenant; it reuses only
   * blocks its own tenant cached.
   */
  async prefill(prompts: readonly string[], signal?: AbortSignal, salt = ''): Promise<PrefillResult> {
    signal?.throwIfAborted();
    const arrivedAt = this.clock.now();
    const previous = this.tail;
    let release!: () => void;
    const done = new Promise<void>((resolve) => { release = resolve; });
    // The next prefill waits for this one and, should this one give up while queued, still for the one before.
    this.tail = previous.then(() => done);
    this.queued += 1;
    let queued = true;
    try {
      await untilSettled(previous, signal);
      this.queued -= 1;
      queued = false;
      const promptKeys = prompts.map((prompt) => {
        const tokens = tokenize(prompt);
        return { tokens: tokens.length, keys: blockKeys(tokens, PREFIX_BLOCK_TOKENS, salt) };
      });
      let promptTokens = 0;
      let cachedTokens = 0;
      for (const prompt of promptKeys) {
        promptTokens += prompt.tokens;
        cachedTokens += Math.min(prompt.tokens, this.cache.cachedBlocks(prompt.keys) * PREFIX_BLOCK_TOKENS);
      }
      const start = Math.max(arrivedAt, this.freeAt);
      this.freeAt = start + ((promptTokens - cachedTokens) * this.settings.prefillMicrosPerToken) / 1000;
      const delay = this.freeAt - this.clock.now();
      try {
        if (delay >= 1) await this.clock.sleep(delay, signal);
        signal?.throwIfAborted();
      } catch (error) {
        this.freeAt = this.clock.now();
        throw error;
      }
      for (const prompt of promptKeys) this.cache.insert(prompt.keys);
      this.record(promptTokens, cachedTokens);
      return { promptTokens, cachedTokens };
    } finally {
      if (queued) this.queued -= 1;
      release();
    }
  }

  /** KV-cache use (blocks held / capacity) and the hit rate over the last HIT_RATE_WINDOW requests (null before the first). */
  signals(): Pick<EngineSignals, 'kvCacheUsage' | 'prefixCacheHitRate'> {
    return {
      kvCacheUsage: this.cache.capacity > 0 ? this.cache.size / this.cache.capacity : 0,
      prefixCacheHitRate: this.recent.length > 0 && this.recentPromptTokens > 0 ? this.recentCachedTokens / this.recentPromptTokens : null,
    };
  }

  private record(prompt: number, cached: number): void {
    this.recent.push({ prompt, cached });
    this.recentPromptTokens += prompt;
    this.recentCachedTokens += cached;
    if (this.recent.length > HIT_RATE_WINDOW) {
      const oldest = this.recent.shift()!;
      this.recentPromptTokens -= oldest.prompt;
      this.recentCachedTokens -= oldest.cached;
    }
  }
}

/** Resolves when `promise` does, or rejects when `signal` aborts first (without leaving a listener behind). */
function untilSettled(promise: Promise<void>, signal?: AbortSignal): Promise<void> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    void promise.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
  });
}
