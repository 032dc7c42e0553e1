/**
 * Checks a GGUF LoRA adapter against the loaded base model before llama.cpp sees it. llama.cpp
 * runs inside the agent's process, and some malformed adapters make it abort (a GGML_ASSERT:
 * `adapter.lora.alpha` of an integer type, for one) rather than throw, which would take every
 * job of the replica down with it. So the agent loads only what llama.cpp's own checks would
 * accept: an adapter (general.type, adapter.type lora, a FLOAT32 alpha: common/adapter-formats),
 * of the base model's architecture, whose every `.lora_a` / `.lora_b` pair adapts a tensor the
 * base model has, with that tensor's input and output sizes, at a rank within max_lora_rank.
 */
import type { LlamaModel } from 'node-llama-cpp';
import { inspectAdapter, type AdapterFacts } from '../../common/adapter-formats';
import { adapterLoadFailed } from '../engines/adapter-failure';
import type { EngineFailure } from '../engines/engine-failure';

/** What the check needs of the base model: its architecture and each tensor's dimensions (ggml order). */
export interface BaseModelTensors {
  readonly architecture: string | null;
  readonly tensors: ReadonlyMap<string, readonly number[]>;
}

export function baseModelTensors(model: LlamaModel): BaseModelTensors {
  const info = model.fileInfo;
  const tensors = new Map<string, number[]>();
  for (const tensor of info.tensorInfo ?? []) tensors.set(tensor.name, tensor.dimensions.map((dimension) => Number(dimension)));
  const architecture = (info.metadata as { general?: { architecture?: string } }).general?.architecture ?? null;
  return { architecture, tensors };
}

/** The adapter's facts when llama.cpp can load it on this base model; an adapter_load_failed (422) naming what is wrong otherwise. */
export function checkLlamaAdapter(bytes: Buffer, base: BaseModelTensors, maxLoraRank: number, label: string): AdapterFacts {
  let facts: AdapterFacts;
  try {
    facts = inspectAdapter(bytes, 'GGUF');
  } catch (error) {
    throw refused(label, (error as Error).message, error);
  }
  if (base.architecture !== null && facts.architecture !== base.architecture) {
    throw refused(label, `it is for architecture ${facts.architecture}, the base model is ${base.architecture}`);
  }
  if (facts.pairs.length === 0) throw refused(label, 'it has no .lora_a / .lora_b tensor pair');
  if (facts.rank > maxLoraRank) throw refused(label, `its rank ${facts.rank} is above this replica's max_lora_rank ${maxLoraRank}`);
  for (const pair of facts.pairs) {
    const dims = base.tensors.get(pair.base);
    if (!dims) throw refused(label, `it adapts ${pair.base}, which the base model does not have`);
    if (dims[0] !== pair.inputs || (dims[1] ?? 1) !== pair.outputs) {
      throw refused(label, `${pair.base} is ${dims.join('x')} in the base model, the adapter's pair makes it ${pair.inputs}x${pair.outputs}`);
    }
  }
  return facts;
}

function refused(label: string, why: string, cause?: unknown): EngineFailure {
  return adapterLoadFailed('invalid', `adapter ${label} does not fit this model: ${why}`, cause);
}
