import { AdapterFormatError } from './adapter-format-error';
import { parseJsonText } from '../json-nesting';
import { GGUF_TYPE, readGgufHeader, type GgufHeader } from './gguf-header';
import { readSafetensorsHeader, type SafetensorsTensor } from './safetensors-header';
import { tarFiles } from './tar-files';

/** The formats whose bytes the platform can read (a Hugging Face repo id is the engine host's to fetch). */
export type InspectableFormat = 'GGUF' | 'PEFT_TAR' | 'SAFETENSORS';

/** One adapted weight: the base tensor it changes, and the low-rank pair's outer dimensions. */
export interface LoraTensorPair {
  /** The base model's tensor: GGUF's name (`blk.0.attn_q.weight`), or PEFT's module path (`model.layers.0.self_attn.q_proj`). */
  readonly base: string;
  readonly rank: number;
  /** The base weight's input and output sizes, as the pair implies them. */
  readonly inputs: number;
  readonly outputs: number;
}

export interface AdapterFacts {
  readonly format: InspectableFormat;
  /** The largest rank of its pairs (PEFT may give modules their own, `rank_pattern`). */
  readonly rank: number;
  readonly alpha: number | null;
  /** GGUF `general.architecture` (must be the base model's); null for PEFT files. */
  readonly architecture: string | null;
  /** PEFT `base_model_name_or_path`; null where the file does not say. */
  readonly baseModel: string | null;
  /** The adapted modules (`attn_q`, `q_proj`, …), sorted. */
  readonly targetModules: string[];
  readonly tensorCount: number;
  readonly pairs: readonly LoraTensorPair[];
}

/**
 * What an adapter's file says about itself, read from its headers alone (no tensor is
 * loaded): its rank, alpha, architecture or base model, and the weights it adapts. Throws an
 * AdapterFormatError naming what is wrong, so a malformed upload is refused at registration,
 * and an agent can refuse one before it reaches an engine that would abort on it (llama.cpp
 * asserts on some malformed adapters; docs/adapters.md).
 */
export function inspectAdapter(bytes: Buffer, format: InspectableFormat): AdapterFacts {
  switch (format) {
    case 'GGUF': return ggufFacts(readGgufHeader(bytes));
    case 'SAFETENSORS': return { ...peftFacts(readSafetensorsHeader(bytes)), format, alpha: null, baseModel: null };
    case 'PEFT_TAR': return peftTarFacts(bytes);
  }
}

function ggufFacts(header: GgufHeader): AdapterFacts {
  const text = (key: string): string | null => {
    const entry = header.metadata.get(key);
    return entry?.type === GGUF_TYPE.STRING ? entry.value as string : null;
  };
  if (text('general.type') !== 'adapter') throw new AdapterFormatError('general.type', 'the GGUF file is not an adapter (general.type must be "adapter")');
  if (text('adapter.type') !== 'lora') throw new AdapterFormatError('adapter.type', 'the GGUF adapter is not a LoRA adapter (adapter.type must be "lora")');
  const architecture = text('general.architecture');
  if (!architecture) throw new AdapterFormatError('general.architecture', 'the GGUF adapter names no general.architecture');
  const alphaEntry = header.metadata.get('adapter.lora.alpha');
  // llama.cpp reads it as a float and aborts the whole process on any other type.
  if (alphaEntry && alphaEntry.type !== GGUF_TYPE.FLOAT32) throw new AdapterFormatError('adapter.lora.alpha', 'adapter.lora.alpha must be a FLOAT32');
  const halves = new Map<string, { a?: number[]; b?: number[] }>();
  for (const tensor of header.tensors) {
    const match = /^(.+)\.lora_(a|b)$/.exec(tensor.name);
    if (!match) throw new AdapterFormatError(tensor.name, `tensor ${tensor.name} is not a LoRA tensor (<base tensor>.lora_a or .lora_b)`);
    const half = halves.get(match[1]!) ?? {};
    half[match[2] as 'a' | 'b'] = tensor.dims;
    halves.set(match[1]!, half);
  }
  const pairs: LoraTensorPair[] = [];
  for (const [base, { a, b }] of halves) {
    if (!a || !b) throw new AdapterFormatError(base, `tensor ${base} has ${a ? 'lora_a' : 'lora_b'} without ${a ? 'lora_b' : 'lora_a'}`);
    // ggml order: lora_a is [in, r], lora_b is [r, out].
    if (a.length !== 2 || b.length !== 2 || a[1] !== b[0] || a[1]! < 1) {
      throw new AdapterFormatError(base, `tensor ${base}'s lora_a [${a}] and lora_b [${b}] are not [in, r] and [r, out]`);
    }
    pairs.push({ base, rank: a[1]!, inputs: a[0]!, outputs: b[1]! });
  }
  return summary('GGUF', pairs, alphaEntry ? alphaEntry.value as number : null, architecture, null, header.tensors.length, ggufModule);
}

function peftTarFacts(bytes: Buffer): AdapterFacts {
  const files = tarFiles(bytes);
  const named = (basename: string) => [...files.keys()].filter((path) => path === basename || path.endsWith(`/${basename}`));
  const configs = named('adapter_config.json');
  const weights = named('adapter_model.safetensors');
  if (configs.length !== 1) throw new AdapterFormatError('adapter_config.json', `the archive must hold one adapter_config.json (it holds ${configs.length})`);
  if (weights.length !== 1) {
    const pickled = named('adapter_model.bin').length > 0;
    throw new AdapterFormatError('adapter_model.safetensors', pickled
      ? 'the archive holds adapter_model.bin: pickled weights are not accepted, save the adapter with safetensors'
      : `the archive must hold one adapter_model.safetensors (it holds ${weights.length})`);
  }
  const config = peftConfig(files.get(configs[0]!)!);
  const facts = peftFacts(readSafetensorsHeader(files.get(weights[0]!)!));
  if (config.r !== facts.rank && !config.hasRankPattern) {
    throw new AdapterFormatError('adapter_config.json r', `adapter_config.json says r = ${config.r} but the weights have rank ${facts.rank}`);
  }
  return { ...facts, format: 'PEFT_TAR', alpha: config.alpha, baseModel: config.baseModel };
}

function peftConfig(bytes: Buffer): { r: number; alpha: number | null; baseModel: string | null; hasRankPattern: boolean } {
  let config: Record<string, unknown>;
  try {
    config = parseJsonText(bytes) as Record<string, unknown>;
  } catch {
    throw new AdapterFormatError('adapter_config.json', 'adapter_config.json is not JSON');
  }
  if (!config || typeof config !== 'object') throw new AdapterFormatError('adapter_config.json', 'adapter_config.json is not a JSON object');
  if (config.peft_type !== undefined && config.peft_type !== 'LORA') throw new AdapterFormatError('adapter_config.json peft_type', `adapter_config.json peft_type is ${String(config.peft_type)}, not LORA`);
  if (!Number.isSafeInteger(config.r) || (config.r as number) < 1) throw new AdapterFormatError('adapter_config.json r', 'adapter_config.json r must be a positive integer');
  const alpha = typeof config.lora_alpha === 'number' ? config.lora_alpha : null;
  const baseModel = typeof config.base_model_name_or_path === 'string' && config.base_model_name_or_path ? config.base_model_name_or_path : null;
  const rankPattern = config.rank_pattern;
  return { r: config.r as number, alpha, baseModel, hasRankPattern: !!rankPattern && typeof rankPattern === 'object' && Object.keys(rankPattern).length > 0 };
}

/** PEFT tensors: `<module path>.lora_A[.<name>].weight` is [r, in], `.lora_B…` is [out, r] (embeddings: lora_embedding_A [r, in], _B [out, r]). */
function peftFacts(tensors: SafetensorsTensor[]): Omit<AdapterFacts, 'format' | 'alpha' | 'baseModel'> {
  const halves = new Map<string, { a?: number[]; b?: number[] }>();
  for (const tensor of tensors) {
    const match = /^(.+)\.lora_(?:embedding_)?(A|B)(?:\.[^.]+)?(?:\.weight)?$/.exec(tensor.name);
    if (!match) continue; // modules_to_save and other full weights travel beside the pairs
    const half = halves.get(match[1]!) ?? {};
    half[match[2] === 'A' ? 'a' : 'b'] = tensor.shape;
    halves.set(match[1]!, half);
  }
  const pairs: LoraTensorPair[] = [];
  for (const [base, { a, b }] of halves) {
    if (!a || !b) throw new AdapterFormatError(base, `module ${base} has ${a ? 'lora_A' : 'lora_B'} without ${a ? 'lora_B' : 'lora_A'}`);
    if (a.length !== 2 || b.length !== 2 || a[0] !== b[1] || a[0]! < 1) {
      throw new AdapterFormatError(base, `module ${base}'s lora_A [${a}] and lora_B [${b}] are not [r, in] and [out, r]`);
    }
    pairs.push({ base, rank: a[0]!, inputs: a[1]!, outputs: b[0]! });
  }
  const { format: _format, alpha: _alpha, baseModel: _base, ...rest } = summary('SAFETENSORS', pairs, null, null, null, tensors.length, peftModule);
  return rest;
}

function summary(
  format: InspectableFormat, pairs: LoraTensorPair[], alpha: number | null, architecture: string | null, baseModel: string | null,
  tensorCount: number, moduleOf: (base: string) => string,
): AdapterFacts {
  if (pairs.length === 0) throw new AdapterFormatError('tensors', 'the adapter holds no LoRA weight pair');
  const rank = Math.max(...pairs.map((pair) => pair.rank));
  const targetModules = [...new Set(pairs.map((pair) => moduleOf(pair.base)))].sort();
  return { format, rank, alpha, architecture, baseModel, targetModules, tensorCount, pairs };
}

/** `blk.0.attn_q.weight` → `attn_q`; `token_embd.weight` → `token_embd`. */
function ggufModule(base: string): string {
  const parts = base.split('.');
  return parts.length >= 2 ? parts[parts.length - 2]! : base;
}

/** `base_model.model.model.layers.0.self_attn.q_proj` → `q_proj`. */
function peftModule(base: string): string {
  return base.slice(base.lastIndexOf('.') + 1);
}
