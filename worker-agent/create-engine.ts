import type { AgentLogger } from './agent-logger';
import { silentLogger } from './agent-logger';
import type { AgentOptions } from './agent-options';
import { cpuEngineOptionsFrom } from './engines/cpu-engine-options';
import { CpuEngine } from './engines/cpu-engine';
import type { Engine } from './engines/engine';
import { LlamaCppEngine } from './llama/llama-cpp-engine';
import { defaultLlamaThreads } from './llama/llama-cpp-options';
import { OpenAiEngine } from './engines/openai-engine';
import { DEFAULT_MAX_LORAS, defaultAdapterDir, type LoraCapacity } from './engines/adapter-options';
import { AdapterStore } from './engines/adapter-store';
import { ModelCache } from './engines/model-cache';
import { defaultModelCacheDir } from './engines/model-cache-options';

/** The host's weights cache the agent's options name (its Hello reports what it holds). */
export function createModelCache(options: AgentOptions): ModelCache {
  return new ModelCache({ directory: options.modelCacheDir ?? defaultModelCacheDir(), fetchTimeoutMs: options.modelFetchTimeoutMs });
}

/** The engine adapter `--engine` names, configured from the agent's options. */
export function createEngine(options: AgentOptions, logger: AgentLogger = silentLogger, modelCache: ModelCache = createModelCache(options)): Engine {
  const maxLoras = options.maxLoras ?? (options.engineKind === 'openai' ? DEFAULT_MAX_LORAS.openai : DEFAULT_MAX_LORAS.builtIn);
  const capacity: LoraCapacity = { maxLoras, maxCpuLoras: options.maxCpuLoras, maxLoraRank: options.maxLoraRank };
  const store = () => new AdapterStore({
    directory: options.adapterDir ?? defaultAdapterDir(), maxBytes: options.adapterDirMaxMb * 1024 * 1024, fetchTimeoutMs: options.adapterFetchTimeoutMs,
  });
  if (options.engineKind === 'openai') {
    return new OpenAiEngine({
      // loadAgentOptions guarantees the URL for the openai engine.
      url: options.engineUrl as string,
      engineModel: options.engineModel,
      apiKey: options.engineApiKey,
      connections: options.maxConcurrency,
      connectTimeoutMs: options.engineConnectTimeoutMs,
      healthIntervalMs: options.engineHealthIntervalMs,
      priorityScheduling: options.enginePriorityScheduling,
      metricsPath: options.engineMetricsPath === 'off' ? null : options.engineMetricsPath,
      cacheSalt: options.engineCacheSalt === 'on',
      warmUp: options.engineWarmUp === 'on',
      // The operator started the engine with the same --max-loras / --max-cpu-loras / --max-lora-rank (0 unless said).
      adapters: { capacity, store: store() },
    });
  }
  if (options.engineKind === 'llama-cpp') {
    return new LlamaCppEngine({
      // loadAgentOptions guarantees the model path or URL for the llama-cpp engine.
      modelPath: options.llamaModelPath,
      ...(options.llamaModelUrl ? { modelSource: { url: options.llamaModelUrl, sha256: options.llamaModelSha256 }, modelCache } : {}),
      threads: options.llamaThreads ?? defaultLlamaThreads(),
      contextSize: options.llamaContextSize,
      parallel: options.llamaParallel,
      cachedSequences: options.llamaCachedSequences,
      prefixCache: options.llamaPrefixCache,
      adapters: { capacity, store: store() },
    }, logger);
  }
  return new CpuEngine(cpuEngineOptionsFrom(options), options.engineModel, { capacity, loadMs: options.cpuLoraLoadMs });
}
