import type { AgentEngineKind } from '../../common/engine-kinds';
import type { Catalog } from '../catalog/catalog';
import type { Deployment } from '../deployments/deployment.entity';

export interface LocalLlamaSettings {
  readonly localEngine: AgentEngineKind;
  readonly localModelPath?: string;
  readonly localLlamaThreads?: number;
  readonly localLlamaContextSize?: number;
  readonly localLlamaParallel?: number;
  readonly localLlamaCachedSequences?: number;
}

/**
 * The engine variables of a deployment's local agents, over the provider's defaults. A model
 * with a GGUF source (or any text model when LOCAL_ENGINE=llama-cpp) runs the `llama-cpp`
 * engine on that file; its agents take as many jobs at once as they have sequences, so the
 * dispatcher's and autoscaler's notion of load matches what the CPU can actually run.
 */
export function localEngineEnv(settings: LocalLlamaSettings, catalog: Catalog): (deployment: Deployment) => Record<string, string> {
  return (deployment): Record<string, string> => {
    const model = catalog.find(deployment.modelId);
    const file = model?.source?.kind === 'gguf'
      ? model.source.path
      : settings.localEngine === 'llama-cpp' && model?.modality === 'text' ? settings.localModelPath : undefined;
    if (!file) return settings.localEngine === 'llama-cpp' ? { WORKER_ENGINE: 'cpu' satisfies AgentEngineKind } : {};
    const parallel = settings.localLlamaParallel ?? 2;
    return {
      WORKER_ENGINE: 'llama-cpp' satisfies AgentEngineKind,
      WORKER_LLAMA_MODEL_PATH: file,
      WORKER_LLAMA_PARALLEL: String(parallel),
      WORKER_MAX_CONCURRENCY: String(parallel),
      ...(settings.localLlamaThreads ? { WORKER_LLAMA_THREADS: String(settings.localLlamaThreads) } : {}),
      ...(settings.localLlamaContextSize ? { WORKER_LLAMA_CONTEXT_SIZE: String(settings.localLlamaContextSize) } : {}),
      ...(settings.localLlamaCachedSequences ? { WORKER_LLAMA_CACHED_SEQUENCES: String(settings.localLlamaCachedSequences) } : {}),
    };
  };
}
