import fs from 'node:fs';
import path from 'node:path';
import type { CatalogEngineKind } from '../../common/engine-kinds';
import type { CatalogModel } from './catalog';

/**
 * The catalog entry of a GGUF file given at start-up (`LOCAL_MODEL_PATH`): a chat model whose
 * local agents run it with llama.cpp on the CPU. Chat, because the engine renders
 * conversations with the model's template or a fallback; base models serve completions too.
 */
export function localGgufModel(file: string, options: { parallel: number }): CatalogModel {
  const absolute = path.resolve(file);
  const name = path.basename(absolute).replace(/\.gguf$/i, '');
  let sizeGb = 0.1;
  try {
    sizeGb = Math.max(0.1, Math.ceil(fs.statSync(absolute).size / 1e8) / 10);
  } catch {
    // A missing file is reported by the agent that cannot load it, on the deployment's replica.
  }
  return {
    id: `local/${name.replace(/[^\w.-]+/g, '-')}`,
    name: `${name} (GGUF, llama.cpp on CPU)`,
    modality: 'text',
    task: 'chat',
    engine: 'llama-cpp' satisfies CatalogEngineKind,
    official: false,
    // Runs on the CPU: this is the memory its weights take (RAM), which placement compares with the offer's.
    gpuMemoryGb: sizeGb,
    inputModalities: ['text'],
    sizes: [],
    targetConcurrency: options.parallel,
    source: { kind: 'gguf', path: absolute },
  };
}
