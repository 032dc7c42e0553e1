/**
 * The host's weights cache (model-cache.ts) and the warm-up, as agent options. The Kubernetes
 * provider sets WORKER_MODEL_CACHE_DIR to the model-cache volume its engines download into.
 */
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { integerOption, optionField, type OptionsOf } from '../option-fields';

/** Where model files are cached when `--model-cache-dir` is unset. */
export function defaultModelCacheDir(): string {
  return path.join(os.tmpdir(), 'inference-worker-agent', 'models');
}

export const modelCacheOptionFields = {
  /**
   * The host's weights cache: model files the agent fetches (the llama-cpp engine's
   * `--model-url`) are kept under `files/` by checksum, and a Hugging Face hub cache under `hub/`
   * (an engine's HF_HOME pointing here: vLLM and SGLang download into it) is read too. The Hello
   * names the models it holds; placement prefers such a host. @default <tmp>/inference-worker-agent/models
   */
  modelCacheDir: optionField(z.string().min(1).optional(), 'WORKER_MODEL_CACHE_DIR', 'model-cache-dir'),
  /** How long fetching one model file may take, in milliseconds. @default 3600000 */
  modelFetchTimeoutMs: optionField(integerOption(100).default(3_600_000), 'WORKER_MODEL_FETCH_TIMEOUT_MS'),
  /**
   * The `openai` engine's warm-up: once it first answers, one tiny completion (`max_tokens` 1)
   * before the replica takes work, timed as the `warm_up` start-up phase. An engine that refuses
   * it (an embedding or image model) only has the phase say so. Off unless asked: the engine may
   * be an endpoint that bills each request, and the agent sends nothing no client asked for
   * unless told; the Kubernetes provider's pods, whose engine it starts, turn it on. @default off
   */
  engineWarmUp: optionField(z.enum(['on', 'off']).default('off'), 'WORKER_ENGINE_WARM_UP', 'engine-warm-up'),
};

export type ModelCacheOptionValues = OptionsOf<typeof modelCacheOptionFields>;
