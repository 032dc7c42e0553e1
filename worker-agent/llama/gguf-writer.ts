/**
 * Writes GGUF v3 files (the llama.cpp model format): a header, typed key/value metadata,
 * tensor descriptions and aligned F32 tensor data. Dependency-free, so tests and start-up
 * can make a model without downloading one. Only what a small F32 model needs is supported.
 */

/** GGUF value types (gguf.h `enum gguf_type`). */
const enum GgufType {
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
}

/** `ggml_type` of F32 tensors. */
const GGML_TYPE_F32 = 0;
const GGUF_VERSION = 3;
/** Tensor data starts, and every tensor begins, at a multiple of this (`general.alignment`'s default). */
export const GGUF_ALIGNMENT = 32;

export type GgufValue =
  | { readonly type: 'u32'; readonly value: number }
  | { readonly type: 'i32'; readonly value: number }
  | { readonly type: 'f32'; readonly value: number }
  | { readonly type: 'bool'; readonly value: boolean }
  | { readonly type: 'string'; readonly value: string }
  | { readonly type: 'string[]'; readonly value: readonly string[] }
  | { readonly type: 'i32[]'; readonly value: readonly number[] };

export interface GgufTensor {
  readonly name: string;
  /** ggml order: `dims[0]` is the contiguous (input) dimension. */
  readonly dims: readonly number[];
  readonly data: Float32Array;
}

/** Little-endian byte sink that grows as needed. */
class ByteSink {
  private buffer = Buffer.alloc(64 * 1024);
  length = 0;

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    const grown = Buffer.alloc(Math.max(this.buffer.length * 2, this.length + bytes));
    this.buffer.copy(grown, 0, 0, this.length);
    this.buffer = grown;
  }

  u32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeUInt32LE(value, this.length);
  }

  i32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeInt32LE(value, this.length);
  }

  u64(value: number): void {
    this.reserve(8);
    this.length = this.buffer.writeBigUInt64LE(BigInt(value), this.length);
  }

  f32(value: number): void {
    this.reserve(4);
    this.length = this.buffer.writeFloatLE(value, this.length);
  }

  string(value: string): void {
    const bytes = Buffer.from(value, 'utf8');
    this.u64(bytes.length);
    this.bytes(bytes);
  }

  bytes(bytes: Uint8Array): void {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
  }

  padTo(alignment: number): void {
    const padding = (alignment - (this.length % alignment)) % alignment;
    this.reserve(padding);
    this.buffer.fill(0, this.length, this.length + padding);
    this.length += padding;
  }

  result(): Buffer {
    return this.buffer.subarray(0, this.length);
  }
}

/** The whole file as one buffer. */
export function encodeGguf(metadata: ReadonlyArray<readonly [string, GgufValue]>, tensors: readonly GgufTensor[]): Buffer {
  const sink = new ByteSink();
  sink.bytes(Buffer.from('GGUF', 'latin1'));
  sink.u32(GGUF_VERSION);
  sink.u64(tensors.length);
  sink.u64(metadata.length);
  for (const [key, value] of metadata) {
    sink.string(key);
    writeValue(sink, value);
  }
  let offset = 0;
  for (const tensor of tensors) {
    const elements = tensor.dims.reduce((product, dim) => product * dim, 1);
    if (elements !== tensor.data.length) throw new Error(`tensor ${tensor.name}: dims ${tensor.dims.join('x')} need ${elements} values, got ${tensor.data.length}`);
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const dim of tensor.dims) sink.u64(dim);
    sink.u32(GGML_TYPE_F32);
    sink.u64(offset);
    offset += alignUp(tensor.data.byteLength, GGUF_ALIGNMENT);
  }
  sink.padTo(GGUF_ALIGNMENT);
  for (const tensor of tensors) {
    sink.bytes(new Uint8Array(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength));
    sink.padTo(GGUF_ALIGNMENT);
  }
  return sink.result();
}

function writeValue(sink: ByteSink, value: GgufValue): void {
  switch (value.type) {
    case 'u32': sink.u32(GgufType.Uint32); sink.u32(value.value); return;
    case 'i32': sink.u32(GgufType.Int32); sink.i32(value.value); return;
    case 'f32': sink.u32(GgufType.Float32); sink.f32(value.value); return;
    case 'bool': sink.u32(GgufType.Bool); sink.bytes(Uint8Array.of(value.value ? 1 : 0)); return;
    case 'string': sink.u32(GgufType.String); sink.string(value.value); return;
    case 'string[]':
      sink.u32(GgufType.Array); sink.u32(GgufType.String); sink.u64(value.value.length);
      for (const item of value.value) sink.string(item);
      return;
    case 'i32[]':
      sink.u32(GgufType.Array); sink.u32(GgufType.Int32); sink.u64(value.value.length);
      for (const item of value.value) sink.i32(item);
      return;
  }
}

function alignUp(value: number, alignment: number): number {
  return Math.ceil(value / alignment) * alignment;
}
