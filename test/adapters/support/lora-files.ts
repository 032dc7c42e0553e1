import { GGUF_TYPE } from '../../../common/adapter-formats';

/**
 * A GGUF LoRA adapter's header (v3, typed metadata, tensor infos; no tensor data: registration
 * reads headers only) with `rank` on each of its pairs, for `architecture`.
 */
export function loraGguf(options: { rank?: number; architecture?: string; alpha?: number; type?: string } = {}): Buffer {
  const rank = options.rank ?? 8;
  const metadata: Array<[string, number, unknown]> = [
    ['general.architecture', GGUF_TYPE.STRING, options.architecture ?? 'llama'], ['general.type', GGUF_TYPE.STRING, options.type ?? 'adapter'],
    ['adapter.type', GGUF_TYPE.STRING, 'lora'], ['adapter.lora.alpha', GGUF_TYPE.FLOAT32, options.alpha ?? 16],
  ];
  const tensors: Array<[string, number[]]> = [['blk.0.attn_q.weight.lora_a', [64, rank]], ['blk.0.attn_q.weight.lora_b', [rank, 64]]];
  const parts: Buffer[] = [];
  const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); parts.push(b); };
  const u64 = (n: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); parts.push(b); };
  const str = (s: string) => { u64(Buffer.byteLength(s)); parts.push(Buffer.from(s)); };
  parts.push(Buffer.from('GGUF'));
  u32(3); u64(tensors.length); u64(metadata.length);
  for (const [key, type, value] of metadata) {
    str(key); u32(type);
    if (type === GGUF_TYPE.STRING) str(value as string);
    else { const b = Buffer.alloc(4); b.writeFloatLE(value as number); parts.push(b); }
  }
  for (const [name, dims] of tensors) { str(name); u32(dims.length); dims.forEach(u64); u32(0); u64(0); }
  return Buffer.concat(parts);
}
