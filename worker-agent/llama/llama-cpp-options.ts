import os from 'node:os';
import { z } from 'zod';
import { booleanOption, integerOption, optionField, type OptionsOf } from '../option-fields';

/** Tokens per sequence when the option is unset (capped at the model's training context). */
export const DEFAULT_LLAMA_CONTEXT_SIZE = 4096;

/**
 * ggml's CPU threads spin while they wait for each other: more threads than free cores does
 * not just stop helping, it collapses (node-llama-cpp's own default of at least 4 threads made
 * 20 tokens take ~5 s instead of ~7 ms on 2 cores). Half the cores, at most 4, leaves room for
 * the gateway, PostgreSQL and a second agent; 2-core machines get 1.
 */
export function defaultLlamaThreads(cores = os.availableParallelism()): number {
  return Math.max(1, Math.min(4, Math.floor(cores / 2)));
}

/** Options of the `llama-cpp` engine (GGUF models on the CPU, in the agent's process). */
export const llamaCppOptionFields = {
  /** GGUF file to serve. `--engine llama-cpp` needs it or `--model-url`. */
  llamaModelPath: optionField(z.string().min(1).optional(), 'WORKER_LLAMA_MODEL_PATH', 'model-path'),
  /**
   * Where to fetch the GGUF file from instead (http or https), into the host's weights cache
   * (`--model-cache-dir`): a second agent on the host finds it there. The fetch is the `download`
   * start-up phase. @default none
   */
  llamaModelUrl: optionField(z.url({ protocol: /^https?$/ }).optional(), 'WORKER_LLAMA_MODEL_URL', 'model-url'),
  /** The fetched file's hex sha256: checked before it is loaded, and the name it is cached under. @default not checked */
  llamaModelSha256: optionField(z.string().regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits').optional(), 'WORKER_LLAMA_MODEL_SHA256', 'model-sha256'),
  /** CPU threads per evaluation. @default half the cores, 1 to 4 */
  llamaThreads: optionField(integerOption(1, 1024).optional(), 'WORKER_LLAMA_THREADS', 'threads'),
  /** Tokens per sequence (prompt + answer). @default 4096, at most the model's training context */
  llamaContextSize: optionField(integerOption(16, 1 << 20).optional(), 'WORKER_LLAMA_CONTEXT_SIZE', 'context-size'),
  /** Sequences decoded together (parallel slots); a request takes one per choice. @default 2 */
  llamaParallel: optionField(integerOption(1, 256).default(2), 'WORKER_LLAMA_PARALLEL', 'parallel'),
  /**
   * Sequences the context keeps, each holding its last request's tokens for the next prompt
   * that shares their prefix; at most `parallel` of them run at once (the rest are a prompt
   * cache, like llama.cpp server's host-memory prompt cache). Each costs a context of KV memory.
   * Values below `parallel` count as `parallel`. @default parallel
   */
  llamaCachedSequences: optionField(integerOption(1, 1024).optional(), 'WORKER_LLAMA_CACHED_SEQUENCES', 'cached-sequences'),
  /** Reuse the longest prompt prefix a sequence still holds (`cached_tokens`); off evaluates every prompt from scratch. @default true */
  llamaPrefixCache: optionField(booleanOption().default(true), 'WORKER_LLAMA_PREFIX_CACHE', 'prefix-cache'),
};

export type LlamaCppOptionValues = OptionsOf<typeof llamaCppOptionFields>;
