import sharp from 'sharp';

/**
 * A PNG of raw RGB pixels. sharp writes no timestamps or other varying metadata, so equal
 * pixels give equal bytes with the same libvips build. Compression level 6 is zlib's usual
 * trade-off: level 9 cost several times the time for a few percent on smooth patterns.
 */
export async function encodePng(pixels: Buffer, width: number, height: number): Promise<Buffer> {
  return await sharp(pixels, { raw: { width, height, channels: 3 } }).png({ compressionLevel: 6 }).toBuffer();
}
