/**
 * Walks ISO BMFF boxes in a buffer without copying. Shared by the MP4 readers; throws
 * Mp4FormatError for anything that does not parse rather than reading past a box.
 */

export class Mp4FormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'Mp4FormatError';
  }
}

export interface BoxRange {
  readonly type: string;
  /** Where the payload starts (after size, type and any 64-bit size). */
  readonly start: number;
  readonly end: number;
}

/**
 * The boxes laid end to end between start and end, lazily: a search stops at its match, so a
 * file whose trailing mdat was cut short still yields the moov in front of it.
 */
export function* childBoxes(bytes: Buffer, start: number, end: number): Generator<BoxRange> {
  let at = start;
  while (at + 8 <= end) {
    let size = bytes.readUInt32BE(at);
    let header = 8;
    if (size === 1) {
      if (at + 16 > end) throw new Mp4FormatError(`box at byte ${at} is truncated`);
      size = Number(bytes.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = end - at; // "extends to the end of the file"
    }
    if (size < header || at + size > end) throw new Mp4FormatError(`box at byte ${at} has an invalid size ${size}`);
    yield { type: bytes.toString('latin1', at + 4, at + 8), start: at + header, end: at + size };
    at += size;
  }
}

export function findBox(boxes: Iterable<BoxRange>, matches: (box: BoxRange) => boolean): BoxRange | undefined {
  for (const box of boxes) if (matches(box)) return box;
  return undefined;
}

/** The first child of `parent` (or of the file, without one) of that type; throws when missing. */
export function requireBox(bytes: Buffer, parent: BoxRange | undefined, type: string): BoxRange {
  const found = findBox(childBoxes(bytes, parent?.start ?? 0, parent?.end ?? bytes.length), (box) => box.type === type);
  if (!found) throw new Mp4FormatError(`the MP4 has no ${type} box${parent ? ` in ${parent.type}` : ''}`);
  return found;
}

/** Follows a path of box types down from `parent`, e.g. ['mdia', 'minf', 'stbl']. */
export function requirePath(bytes: Buffer, parent: BoxRange | undefined, types: readonly string[]): BoxRange {
  return types.reduce<BoxRange | undefined>((current, type) => requireBox(bytes, current, type), parent) as BoxRange;
}

/** The unsigned 32-bit field `offset` bytes into a box's payload, refusing to read past the box. */
export function readUint32(bytes: Buffer, box: BoxRange, offset: number): number {
  if (box.start + offset + 4 > box.end) throw new Mp4FormatError(`the ${box.type} box is too short`);
  return bytes.readUInt32BE(box.start + offset);
}

/** As readUint32, for version-1 boxes' 64-bit times and co64 offsets. */
export function readUint64(bytes: Buffer, box: BoxRange, offset: number): number {
  if (box.start + offset + 8 > box.end) throw new Mp4FormatError(`the ${box.type} box is too short`);
  return Number(bytes.readBigUInt64BE(box.start + offset));
}

/** The first track whose handler is `vide`. */
export function videoTrack(bytes: Buffer): BoxRange {
  const movie = requireBox(bytes, undefined, 'moov');
  const track = findBox(childBoxes(bytes, movie.start, movie.end), (box) => {
    if (box.type !== 'trak') return false;
    const handler = requirePath(bytes, box, ['mdia', 'hdlr']);
    return readUint32(bytes, handler, 8) === 0x76696465; // handler_type 'vide', after version/flags and pre_defined
  });
  if (!track) throw new Mp4FormatError('the MP4 has no video track');
  return track;
}
