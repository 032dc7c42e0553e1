/** Byte builders for ISO BMFF (ISO/IEC 14496-12) boxes; big-endian throughout, as the format requires. */

export function box(type: string, ...payload: Buffer[]): Buffer {
  const header = Buffer.alloc(8);
  const size = 8 + payload.reduce((total, part) => total + part.length, 0);
  if (size > 0xffffffff) throw new RangeError(`the ${type} box would exceed 4 GiB, which needs 64-bit sizes this writer does not emit`);
  header.writeUInt32BE(size, 0);
  header.write(type, 4, 4, 'latin1');
  return Buffer.concat([header, ...payload]);
}

/** A box that starts with a version byte and 24 bits of flags. */
export function fullBox(type: string, version: number, flags: number, ...payload: Buffer[]): Buffer {
  return box(type, uint32((version << 24) | flags), ...payload);
}

export function uint8(...values: number[]): Buffer {
  return Buffer.from(values);
}

export function uint16(...values: number[]): Buffer {
  const bytes = Buffer.alloc(values.length * 2);
  values.forEach((value, index) => bytes.writeUInt16BE(value, index * 2));
  return bytes;
}

export function uint32(...values: number[]): Buffer {
  return uint32List(values);
}

/** uint32 for long lists (a sample size per frame), which would overflow the stack as spread arguments. */
export function uint32List(values: readonly number[]): Buffer {
  const bytes = Buffer.alloc(values.length * 4);
  values.forEach((value, index) => bytes.writeUInt32BE(value >>> 0, index * 4));
  return bytes;
}

export function fourcc(...codes: string[]): Buffer {
  return Buffer.from(codes.join(''), 'latin1');
}

/** 16.16 fixed point, as tkhd stores width and height. */
export function fixed16(value: number): Buffer {
  return uint32(Math.round(value * 0x10000));
}

/** The identity transform that mvhd and tkhd carry (a, b, u, c, d, v, x, y, w). */
export const UNITY_MATRIX = uint32(0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000);

/** An MPEG-4 descriptor (ISO/IEC 14496-1) with its expandable size field. */
export function descriptor(tag: number, ...payload: Buffer[]): Buffer {
  const body = Buffer.concat(payload);
  const size: number[] = [];
  let remaining = body.length;
  do {
    size.unshift(remaining & 0x7f);
    remaining >>>= 7;
  } while (remaining > 0);
  for (let index = 0; index < size.length - 1; index += 1) size[index] |= 0x80;
  return Buffer.concat([uint8(tag, ...size), body]);
}
