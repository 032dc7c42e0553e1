import { AdapterFormatError } from './adapter-format-error';

/** GGUF value types (ggml's `gguf_type`). */
export const GGUF_TYPE = {
  UINT8: 0, INT8: 1, UINT16: 2, INT16: 3, UINT32: 4, INT32: 5, FLOAT32: 6, BOOL: 7, STRING: 8, ARRAY: 9, UINT64: 10, INT64: 11, FLOAT64: 12,
} as const;

export interface GgufValue {
  readonly type: number;
  /** For ARRAY, the items' type. */
  readonly itemType?: number;
  readonly value: number | bigint | boolean | string | Array<number | bigint | boolean | string>;
}

export interface GgufTensorInfo {
  readonly name: string;
  /** In ggml order: `dims[0]` is the input dimension (ne[0]). */
  readonly dims: number[];
  readonly type: number;
}

export interface GgufHeader {
  readonly version: number;
  readonly metadata: ReadonlyMap<string, GgufValue>;
  readonly tensors: readonly GgufTensorInfo[];
}

const MAGIC = 0x46554747; // "GGUF" little-endian

/**
 * The metadata and tensor infos of a GGUF file (versions 2 and 3), without its tensor data.
 * Every length is checked against the bytes present before it is read, so a hostile header
 * fails with an AdapterFormatError instead of allocating what it claims.
 */
export function readGgufHeader(bytes: Buffer): GgufHeader {
  const cursor = new Cursor(bytes);
  if (bytes.length < 24 || bytes.readUInt32LE(0) !== MAGIC) throw new AdapterFormatError('gguf', 'the file is not GGUF (no GGUF magic)');
  cursor.skip(4);
  const version = cursor.u32();
  if (version !== 2 && version !== 3) throw new AdapterFormatError('gguf', `GGUF version ${version} is not supported (2 or 3)`);
  const tensorCount = cursor.count('tensor count', 8);
  const kvCount = cursor.count('metadata count', 9);
  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = cursor.string();
    const type = cursor.u32();
    if (type === GGUF_TYPE.ARRAY) {
      const itemType = cursor.u32();
      const count = cursor.count(`${key} length`, 1);
      const items: Array<number | bigint | boolean | string> = [];
      for (let j = 0; j < count; j++) items.push(cursor.scalar(itemType, key));
      metadata.set(key, { type, itemType, value: items });
    } else {
      metadata.set(key, { type, value: cursor.scalar(type, key) });
    }
  }
  const tensors: GgufTensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = cursor.string();
    const nDims = cursor.u32();
    if (nDims < 1 || nDims > 4) throw new AdapterFormatError(name, `tensor ${name} has ${nDims} dimensions (1 to 4)`);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(cursor.count(`${name} dimension`, 0));
    const type = cursor.u32();
    cursor.skip(8); // its data offset
    tensors.push({ name, dims, type });
  }
  return { version, metadata, tensors };
}

class Cursor {
  private at = 0;
  constructor(private readonly bytes: Buffer) {}

  skip(n: number): void { this.need(n); this.at += n; }

  u32(): number { this.need(4); const v = this.bytes.readUInt32LE(this.at); this.at += 4; return v; }

  /** A u64 count, bounded by the bytes left (each counted item takes at least `minBytes`). */
  count(what: string, minBytes: number): number {
    this.need(8);
    const value = this.bytes.readBigUInt64LE(this.at);
    this.at += 8;
    const left = this.bytes.length - this.at;
    if (value > BigInt(Number.MAX_SAFE_INTEGER) || (minBytes > 0 && Number(value) * minBytes > left)) {
      throw new AdapterFormatError('gguf', `the GGUF ${what} (${value}) is larger than the file`);
    }
    return Number(value);
  }

  string(): string {
    const length = this.count('string length', 1);
    const text = this.bytes.toString('utf8', this.at, this.at + length);
    this.at += length;
    return text;
  }

  scalar(type: number, key: string): number | bigint | boolean | string {
    switch (type) {
      case GGUF_TYPE.UINT8: this.need(1); return this.bytes.readUInt8(this.at++);
      case GGUF_TYPE.INT8: this.need(1); return this.bytes.readInt8(this.at++);
      case GGUF_TYPE.BOOL: this.need(1); return this.bytes.readUInt8(this.at++) !== 0;
      case GGUF_TYPE.UINT16: return this.read(2, (at) => this.bytes.readUInt16LE(at));
      case GGUF_TYPE.INT16: return this.read(2, (at) => this.bytes.readInt16LE(at));
      case GGUF_TYPE.UINT32: return this.read(4, (at) => this.bytes.readUInt32LE(at));
      case GGUF_TYPE.INT32: return this.read(4, (at) => this.bytes.readInt32LE(at));
      case GGUF_TYPE.FLOAT32: return this.read(4, (at) => this.bytes.readFloatLE(at));
      case GGUF_TYPE.UINT64: return this.read(8, (at) => this.bytes.readBigUInt64LE(at));
      case GGUF_TYPE.INT64: return this.read(8, (at) => this.bytes.readBigInt64LE(at));
      case GGUF_TYPE.FLOAT64: return this.read(8, (at) => this.bytes.readDoubleLE(at));
      case GGUF_TYPE.STRING: return this.string();
      default: throw new AdapterFormatError(key, `GGUF key ${key} has an unknown value type ${type}`);
    }
  }

  private read<T>(n: number, reader: (at: number) => T): T {
    this.need(n);
    const value = reader(this.at);
    this.at += n;
    return value;
  }

  private need(n: number): void {
    if (this.at + n > this.bytes.length) throw new AdapterFormatError('gguf', 'the GGUF header ends before its declared contents');
  }
}
