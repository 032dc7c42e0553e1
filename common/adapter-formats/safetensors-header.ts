import { AdapterFormatError } from './adapter-format-error';
import { parseJsonText } from '../json-nesting';

export interface SafetensorsTensor {
  readonly name: string;
  readonly dtype: string;
  /** Row-major, as PyTorch writes it: a PEFT `lora_A` is [r, in], `lora_B` [out, r]. */
  readonly shape: number[];
}

/** The header's own cap (the format's reference reader refuses more): no JSON parse of an unbounded string. */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;
const DTYPE_BYTES: Record<string, number> = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1, F8_E4M3: 1, F8_E5M2: 1 };

/**
 * The tensors a .safetensors file declares: an 8-byte little-endian header length, a JSON
 * header, then the data. Each tensor's byte range must lie in the data and match its dtype and
 * shape, so a truncated or inconsistent file is refused before an engine sees it.
 */
export function readSafetensorsHeader(bytes: Buffer): SafetensorsTensor[] {
  if (bytes.length < 8) throw new AdapterFormatError('safetensors', 'the file is too short to be safetensors');
  const headerLength = bytes.readBigUInt64LE(0);
  if (headerLength > BigInt(Math.min(MAX_HEADER_BYTES, bytes.length - 8))) throw new AdapterFormatError('safetensors', 'the safetensors header length is larger than the file');
  const dataStart = 8 + Number(headerLength);
  let header: unknown;
  try {
    header = parseJsonText(bytes.subarray(8, dataStart));
  } catch {
    throw new AdapterFormatError('safetensors', 'the safetensors header is not JSON');
  }
  if (!header || typeof header !== 'object' || Array.isArray(header)) throw new AdapterFormatError('safetensors', 'the safetensors header is not a JSON object');
  const dataLength = bytes.length - dataStart;
  const tensors: SafetensorsTensor[] = [];
  for (const [name, entry] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__') continue;
    const { dtype, shape, data_offsets: offsets } = (entry ?? {}) as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const width = typeof dtype === 'string' ? DTYPE_BYTES[dtype] : undefined;
    if (!width) throw new AdapterFormatError(name, `tensor ${name} has an unsupported dtype`);
    if (!Array.isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && n >= 0)) throw new AdapterFormatError(name, `tensor ${name} has no valid shape`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every((n) => Number.isSafeInteger(n) && n >= 0)) throw new AdapterFormatError(name, `tensor ${name} has no valid data_offsets`);
    const [begin, end] = offsets as [number, number];
    const elements = (shape as number[]).reduce((product, n) => product * n, 1);
    if (end < begin || end > dataLength || end - begin !== elements * width) {
      throw new AdapterFormatError(name, `tensor ${name}'s data does not match its dtype and shape, or lies past the end of the file`);
    }
    tensors.push({ name, dtype: dtype as string, shape: shape as number[] });
  }
  return tensors;
}
