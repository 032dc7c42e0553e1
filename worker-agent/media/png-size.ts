import { MediaInputError, type MediaInputField } from './media-input-error';

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * Width and height from a PNG's IHDR chunk, without decoding pixels (cheap enough to check an
 * upload before doing any work). IHDR must be the first chunk, so it sits at a fixed offset.
 */
export function pngSize(bytes: Buffer, field: MediaInputField = 'image'): { width: number; height: number } {
  const isPng = bytes.length >= 24 && bytes.subarray(0, 8).equals(PNG_SIGNATURE) && bytes.toString('latin1', 12, 16) === 'IHDR';
  if (!isPng) throw new MediaInputError(field, `${field} is not a PNG image`);
  return { width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
}
