import { GGUF_TYPE } from '../../common/adapter-formats';

/**
 * A GGUF v3 header: typed metadata (strings, FLOAT32 and UINT32 values) and F32 tensor infos,
 * with no tensor data (what reads only headers, registration and common/adapter-formats, needs).
 */
export function ggufHeader(metadata: Array<[string, number, unknown]>, tensors: Array<[string, number[]]>): Buffer {
  const parts: Buffer[] = [];
  const u32 = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(n); parts.push(b); };
  const u64 = (n: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(n)); parts.push(b); };
  const str = (s: string) => { u64(Buffer.byteLength(s)); parts.push(Buffer.from(s)); };
  parts.push(Buffer.from('GGUF'));
  u32(3); u64(tensors.length); u64(metadata.length);
  for (const [key, type, value] of metadata) {
    str(key); u32(type);
    if (type === GGUF_TYPE.STRING) str(value as string);
    else if (type === GGUF_TYPE.FLOAT32) { const b = Buffer.alloc(4); b.writeFloatLE(value as number); parts.push(b); }
    else if (type === GGUF_TYPE.UINT32) u32(value as number);
    else throw new Error(`ggufHeader writes no value of type ${type}`);
  }
  for (const [name, dims] of tensors) { str(name); u32(dims.length); dims.forEach(u64); u32(0); u64(0); }
  return Buffer.concat(parts);
}
