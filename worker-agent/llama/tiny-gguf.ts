/**
 * A tiny but valid `llama` model for tests and demos: seeded random F32 weights, a byte-level
 * GPT-2 style tokenizer (one token per byte, no merges) and a ChatML chat template. llama.cpp
 * loads it in milliseconds and runs real tokenisation, sampling and generation on it.
 *
 * Random weights emit random bytes, often invalid UTF-8. To keep the output printable, one
 * residual dimension is a constant 1 in every embedding row and no layer writes to it; its
 * column of `output.weight` is then a per-token bias that favours printable ASCII and keeps
 * control tokens (EOS included) away, so generations run to `max_tokens` unless stopped.
 */
import fs from 'node:fs';
import { seededRandom } from '../../common/seeded-random';
import { encodeGguf, type GgufTensor, type GgufValue } from './gguf-writer';

export interface TinyGgufOptions {
  /** Seed of the weights; the same seed writes the same bytes. @default 1 */
  readonly seed?: number;
  /** Training context length (`llama.context_length`). @default 1024 */
  readonly contextLength?: number;
  /** Hidden size. @default 64 */
  readonly embeddingLength?: number;
  /** @default 2 */
  readonly layers?: number;
  /** @default 4 */
  readonly heads?: number;
  /** Key/value heads (grouped-query attention when fewer than `heads`). @default 2 */
  readonly kvHeads?: number;
  /** @default 128 */
  readonly feedForwardLength?: number;
  /** Jinja chat template; `null` writes none (the adapter's fallback is used). @default ChatML */
  readonly chatTemplate?: string | null;
  /** `general.name`. @default "tiny-llama" (the embedding variant: "tiny-llama-embed") */
  readonly name?: string;
  /**
   * `embedding` writes the same network as an embedding model, as GGUF embedding models are:
   * mean pooling (`llama.pooling_type` 1), no output head (`output.weight`) and no chat
   * template. With the same seed its per-token states are the chat variant's.
   * @default "chat"
   */
  readonly variant?: 'chat' | 'embedding';
}

/** llama.cpp's LLAMA_POOLING_TYPE_MEAN. */
const POOLING_MEAN = 1;

/** Control tokens after the 256 byte tokens. */
export const TINY_SPECIAL_TOKENS = Object.freeze({ endOfText: 256, imStart: 257, imEnd: 258 });
const SPECIAL_TEXTS = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
export const TINY_VOCAB_SIZE = 256 + SPECIAL_TEXTS.length;

/** The ChatML template Qwen and many others ship (no default system prompt). */
export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const TOKEN_TYPE_NORMAL = 1;
const TOKEN_TYPE_CONTROL = 3;
const PRINTABLE_BIAS = 3;
const SUPPRESSED_BIAS = -30;

/** The model file's bytes (about 0.5 MB with the defaults). */
export function tinyGguf(options: TinyGgufOptions = {}): Buffer {
  const shape = {
    contextLength: options.contextLength ?? 1024,
    embedding: options.embeddingLength ?? 64,
    layers: options.layers ?? 2,
    heads: options.heads ?? 4,
    kvHeads: options.kvHeads ?? 2,
    feedForward: options.feedForwardLength ?? 128,
  };
  if (shape.embedding % shape.heads !== 0 || shape.heads % shape.kvHeads !== 0) {
    throw new Error('embeddingLength must be a multiple of heads, and heads a multiple of kvHeads');
  }
  const headDim = shape.embedding / shape.heads;
  const embedding = options.variant === 'embedding';
  const chatTemplate = embedding ? null : options.chatTemplate === undefined ? CHATML_TEMPLATE : options.chatTemplate;
  const metadata: Array<readonly [string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: 'llama' }],
    ['general.name', { type: 'string', value: options.name ?? (embedding ? 'tiny-llama-embed' : 'tiny-llama') }],
    ...(embedding ? [['llama.pooling_type', { type: 'u32', value: POOLING_MEAN }] as const] : []),
    ['llama.context_length', { type: 'u32', value: shape.contextLength }],
    ['llama.embedding_length', { type: 'u32', value: shape.embedding }],
    ['llama.block_count', { type: 'u32', value: shape.layers }],
    ['llama.feed_forward_length', { type: 'u32', value: shape.feedForward }],
    ['llama.attention.head_count', { type: 'u32', value: shape.heads }],
    ['llama.attention.head_count_kv', { type: 'u32', value: shape.kvHeads }],
    ['llama.attention.layer_norm_rms_epsilon', { type: 'f32', value: 1e-5 }],
    ['llama.rope.dimension_count', { type: 'u32', value: headDim }],
    ['llama.rope.freq_base', { type: 'f32', value: 10_000 }],
    ['llama.vocab_size', { type: 'u32', value: TINY_VOCAB_SIZE }],
    ['tokenizer.ggml.model', { type: 'string', value: 'gpt2' }],
    ['tokenizer.ggml.pre', { type: 'string', value: 'default' }],
    ['tokenizer.ggml.tokens', { type: 'string[]', value: [...byteTokenTexts(), ...SPECIAL_TEXTS] }],
    ['tokenizer.ggml.token_type', { type: 'i32[]', value: [...Array(256).fill(TOKEN_TYPE_NORMAL), ...SPECIAL_TEXTS.map(() => TOKEN_TYPE_CONTROL)] }],
    ['tokenizer.ggml.merges', { type: 'string[]', value: [] }],
    ['tokenizer.ggml.bos_token_id', { type: 'u32', value: TINY_SPECIAL_TOKENS.endOfText }],
    ['tokenizer.ggml.eos_token_id', { type: 'u32', value: TINY_SPECIAL_TOKENS.imEnd }],
    ['tokenizer.ggml.padding_token_id', { type: 'u32', value: TINY_SPECIAL_TOKENS.endOfText }],
    ['tokenizer.ggml.add_bos_token', { type: 'bool', value: false }],
    ...(chatTemplate === null ? [] : [['tokenizer.chat_template', { type: 'string', value: chatTemplate }] as const]),
  ];
  const tensors = tinyTensors(shape, options.seed ?? 1);
  return encodeGguf(metadata, embedding ? tensors.filter((tensor) => tensor.name !== 'output.weight') : tensors);
}

/** Writes the model to `file` (creating or replacing it) and returns the path. */
export function writeTinyGguf(file: string, options: TinyGgufOptions = {}): string {
  fs.writeFileSync(file, tinyGguf(options));
  return file;
}

/**
 * How many tokens the tiny tokenizer makes of `text`: one per UTF-8 byte, and one per
 * control token when `special` is set (template text; user content never parses as special).
 */
export function tinyTokenCount(text: string, special = false): number {
  if (!special) return Buffer.byteLength(text, 'utf8');
  let count = 0;
  for (const part of text.split(/(<\|endoftext\|>|<\|im_start\|>|<\|im_end\|>)/)) {
    count += SPECIAL_TEXTS.includes(part) ? 1 : Buffer.byteLength(part, 'utf8');
  }
  return count;
}

interface Shape {
  readonly embedding: number;
  readonly layers: number;
  readonly heads: number;
  readonly kvHeads: number;
  readonly feedForward: number;
}

function tinyTensors(shape: Shape, seed: number): GgufTensor[] {
  const random = seededRandom(seed);
  const { embedding: E, feedForward: F } = shape;
  const kv = (E / shape.heads) * shape.kvHeads;
  const constant = E - 1;
  /** `rows` rows of `columns` inputs, uniform with standard deviation `std`. */
  const matrix = (columns: number, rows: number, std: number) => {
    const data = new Float32Array(columns * rows);
    const range = std * Math.sqrt(3);
    for (let index = 0; index < data.length; index++) data[index] = (random() * 2 - 1) * range;
    return data;
  };
  const ones = (length: number) => new Float32Array(length).fill(1);
  /** Keeps a layer from writing into the constant residual dimension. */
  const withoutConstantRow = (data: Float32Array, columns: number) => {
    data.fill(0, constant * columns, (constant + 1) * columns);
    return data;
  };

  const embeddings = matrix(E, TINY_VOCAB_SIZE, 1);
  for (let token = 0; token < TINY_VOCAB_SIZE; token++) embeddings[token * E + constant] = 1;
  const tensors: GgufTensor[] = [{ name: 'token_embd.weight', dims: [E, TINY_VOCAB_SIZE], data: embeddings }];
  for (let layer = 0; layer < shape.layers; layer++) {
    const block = `blk.${layer}`;
    tensors.push(
      { name: `${block}.attn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${block}.attn_q.weight`, dims: [E, E], data: matrix(E, E, 1 / Math.sqrt(E)) },
      { name: `${block}.attn_k.weight`, dims: [E, kv], data: matrix(E, kv, 1 / Math.sqrt(E)) },
      { name: `${block}.attn_v.weight`, dims: [E, kv], data: matrix(E, kv, 1 / Math.sqrt(E)) },
      { name: `${block}.attn_output.weight`, dims: [E, E], data: withoutConstantRow(matrix(E, E, 1 / Math.sqrt(E)), E) },
      { name: `${block}.ffn_norm.weight`, dims: [E], data: ones(E) },
      { name: `${block}.ffn_gate.weight`, dims: [E, F], data: matrix(E, F, 1 / Math.sqrt(E)) },
      { name: `${block}.ffn_up.weight`, dims: [E, F], data: matrix(E, F, 1 / Math.sqrt(E)) },
      { name: `${block}.ffn_down.weight`, dims: [F, E], data: withoutConstantRow(matrix(F, E, 1 / Math.sqrt(F)), F) },
    );
  }
  const output = matrix(E, TINY_VOCAB_SIZE, 0.3);
  for (let token = 0; token < TINY_VOCAB_SIZE; token++) {
    const printable = token >= 0x20 && token <= 0x7e;
    output[token * E + constant] = printable ? PRINTABLE_BIAS : SUPPRESSED_BIAS;
  }
  tensors.push({ name: 'output_norm.weight', dims: [E], data: ones(E) }, { name: 'output.weight', dims: [E, TINY_VOCAB_SIZE], data: output });
  return tensors;
}

/**
 * GPT-2's byte-to-unicode table: byte-level BPE vocabularies spell byte `b` as this
 * printable character, so token `b` of the tiny vocabulary is the byte `b`.
 */
function byteTokenTexts(): string[] {
  const printable = (byte: number) => (byte >= 0x21 && byte <= 0x7e) || (byte >= 0xa1 && byte <= 0xac) || (byte >= 0xae && byte <= 0xff);
  let next = 256;
  return Array.from({ length: 256 }, (_, byte) => String.fromCodePoint(printable(byte) ? byte : next++));
}
