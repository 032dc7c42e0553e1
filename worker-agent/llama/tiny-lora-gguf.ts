/**
 * GGUF LoRA adapters for the tiny model (tiny-gguf.ts), written at test time: seeded random
 * low-rank pairs on the attention projections and the feed-forward input, large enough to
 * change greedy output, so tests can tell an adapter's answer from the base model's and two
 * adapters' answers apart. The layers that write into the residual stream (`attn_output`,
 * `ffn_down`) are left alone: the tiny model's constant dimension, which keeps its output
 * printable, stays constant.
 *
 * Format (llama.cpp's `llama-adapter.cpp`): `general.type = "adapter"`, `general.architecture`
 * the base model's, `adapter.type = "lora"`, `adapter.lora.alpha` a FLOAT32 (llama.cpp aborts on
 * another type), and per adapted tensor `<name>.lora_a` with dims (ne) [in, r] and
 * `<name>.lora_b` with [r, out].
 */
import fs from 'node:fs';
import { seededRandom } from '../../common/seeded-random';
import { encodeGguf, type GgufTensor, type GgufValue } from './gguf-writer';

export interface TinyLoraOptions {
  /** Seed of the pairs: adapters of different seeds change the output differently. @default 1 */
  readonly seed?: number;
  /** @default 8 */
  readonly rank?: number;
  /** `adapter.lora.alpha`; the effective scale is alpha / rank. @default rank */
  readonly alpha?: number;
  /** Standard deviation of `lora_b` values (`lora_a`'s is 1/sqrt(in)). @default 0.5 */
  readonly strength?: number;
  /** The base model's shape (tiny-gguf.ts defaults). */
  readonly embeddingLength?: number;
  readonly layers?: number;
  readonly heads?: number;
  readonly kvHeads?: number;
  readonly feedForwardLength?: number;
  /** `general.architecture`. @default "llama" */
  readonly architecture?: string;
  /** Malformed on purpose (tests): alpha written as an integer, or `lora_a` / `lora_b` dims that do not fit the base. */
  readonly malformed?: 'integer-alpha' | 'wrong-shape';
}

export function tinyLoraGguf(options: TinyLoraOptions = {}): Buffer {
  const rank = options.rank ?? 8;
  const E = options.embeddingLength ?? 64;
  const heads = options.heads ?? 4;
  const kv = (E / heads) * (options.kvHeads ?? 2);
  const F = options.feedForwardLength ?? 128;
  const random = seededRandom(options.seed ?? 1);
  const uniform = (length: number, std: number) => {
    const data = new Float32Array(length);
    const range = std * Math.sqrt(3);
    for (let index = 0; index < length; index++) data[index] = (random() * 2 - 1) * range;
    return data;
  };
  const strength = options.strength ?? 0.5;
  const targets: Array<readonly [string, number, number]> = [];
  for (let layer = 0; layer < (options.layers ?? 2); layer++) {
    targets.push([`blk.${layer}.attn_q.weight`, E, E], [`blk.${layer}.attn_k.weight`, E, kv], [`blk.${layer}.attn_v.weight`, E, kv],
      [`blk.${layer}.ffn_gate.weight`, E, F], [`blk.${layer}.ffn_up.weight`, E, F]);
  }
  const tensors: GgufTensor[] = targets.flatMap(([name, inputs, outputs], index) => {
    const wrong = options.malformed === 'wrong-shape' && index === 0;
    // ggml order: lora_a is [in, r] (ne0 = in), lora_b is [r, out].
    const aDims = wrong ? [rank, inputs] : [inputs, rank];
    return [
      { name: `${name}.lora_a`, dims: aDims, data: uniform(inputs * rank, 1 / Math.sqrt(inputs)) },
      { name: `${name}.lora_b`, dims: [rank, outputs], data: uniform(rank * outputs, strength) },
    ];
  });
  const alpha = options.alpha ?? rank;
  const metadata: Array<readonly [string, GgufValue]> = [
    ['general.architecture', { type: 'string', value: options.architecture ?? 'llama' }],
    ['general.type', { type: 'string', value: 'adapter' }],
    ['general.name', { type: 'string', value: `tiny-lora-${options.seed ?? 1}` }],
    ['adapter.type', { type: 'string', value: 'lora' }],
    ['adapter.lora.alpha', options.malformed === 'integer-alpha' ? { type: 'u32', value: Math.round(alpha) } : { type: 'f32', value: alpha }],
  ];
  return encodeGguf(metadata, tensors);
}

/** Writes the adapter to `file` and returns the path. */
export function writeTinyLoraGguf(file: string, options: TinyLoraOptions = {}): string {
  fs.writeFileSync(file, tinyLoraGguf(options));
  return file;
}
