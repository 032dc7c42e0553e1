import type { AgentLogger } from './agent-logger';
import { silentLogger } from './agent-logger';
import type { AgentOptions } from './agent-options';
import { cpuEngineOptionsFrom } from './engines/cpu-engine-options';
import { CpuEngine } from './engines/cpu-engine';
import type { Engine } from './engines/engine';
import { LlamaCppEngine } from './llama/llama-cpp-engine';
import { defaultLlamaThreads } from './llama/llama-cpp-options';
import { OpenAiEngine } from './engines/openai-engine';

/** The engine adapter `--engine` names, configured from the agent's options. */
export function createEngine(options: AgentOptions, logger: AgentLogger = silentLogger): Engine {
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
    });
  }
  if (options.engineKind === 'llama-cpp') {
    return new LlamaCppEngine({
      // loadAgentOptions guarantees the model path for the llama-cpp engine.
      modelPath: options.llamaModelPath as string,
      threads: options.llamaThreads ?? defaultLlamaThreads(),
      contextSize: options.llamaContextSize,
      parallel: options.llamaParallel,
      cachedSequences: options.llamaCachedSequences,
      prefixCache: options.llamaPrefixCache,
    }, logger);
  }
  return new CpuEngine(cpuEngineOptionsFrom(options), options.engineModel);
}
