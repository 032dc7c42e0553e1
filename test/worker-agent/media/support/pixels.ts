import sharp from 'sharp';

export interface RgbImage {
  readonly data: Buffer;
  readonly width: number;
  readonly height: number;
}

/** Decodes any image sharp reads to raw RGB, optionally covering and centre-cropping to a size. */
export async function decodeRgb(bytes: Buffer, size?: { width: number; height: number }): Promise<RgbImage> {
  let pipeline = sharp(bytes);
  if (size) pipeline = pipeline.resize(size.width, size.height, { fit: 'cover', position: 'centre' });
  const { data, info } = await pipeline.removeAlpha().toColourspace('srgb').raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/** Average per-channel difference, 0 (identical) to 255. */
export function meanAbsoluteDifference(first: Buffer, second: Buffer): number {
  if (first.length !== second.length) throw new Error(`cannot compare ${first.length} bytes with ${second.length}`);
  let total = 0;
  for (let index = 0; index < first.length; index += 1) {
    const difference = first[index] - second[index];
    total += difference < 0 ? -difference : difference; // no global Math lookup: slow in jest's vm context
  }
  return total / first.length;
}

/** Pearson correlation of two RGB images' luma: near 1 when one is a recoloured version of the other. */
export function lumaCorrelation(first: Buffer, second: Buffer): number {
  const count = first.length / 3;
  let sumFirst = 0, sumSecond = 0, sumProduct = 0, sumFirstSquared = 0, sumSecondSquared = 0;
  for (let at = 0; at < first.length; at += 3) {
    const lumaFirst = 0.299 * first[at] + 0.587 * first[at + 1] + 0.114 * first[at + 2];
    const lumaSecond = 0.299 * second[at] + 0.587 * second[at + 1] + 0.114 * second[at + 2];
    sumFirst += lumaFirst;
    sumSecond += lumaSecond;
    sumProduct += lumaFirst * lumaSecond;
    sumFirstSquared += lumaFirst * lumaFirst;
    sumSecondSquared += lumaSecond * lumaSecond;
  }
  const covariance = sumProduct - (sumFirst * sumSecond) / count;
  const varianceFirst = sumFirstSquared - (sumFirst * sumFirst) / count;
  const varianceSecond = sumSecondSquared - (sumSecond * sumSecond) / count;
  return covariance / Math.sqrt(varianceFirst * varianceSecond);
}

/**
 * A picture with structure unlike the renderers' plasma: a diagonal ramp under hard-edged
 * rectangles, so "derived from it" is easy to tell from "derived from something else".
 */
export function testPicture(width: number, height: number, variant: number): Buffer {
  const pixels = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      const at = (y * width + x) * 3;
      const inBlock = Math.floor((x + variant * 17) / 24) % 2 === Math.floor((y + variant * 11) / 24) % 2;
      const ramp = Math.round((255 * (variant % 2 === 0 ? x : width - 1 - x)) / Math.max(1, width - 1));
      pixels[at] = inBlock ? 230 : ramp;
      pixels[at + 1] = inBlock ? 40 + variant * 60 : Math.round((255 * y) / Math.max(1, height - 1));
      pixels[at + 2] = inBlock ? 30 : 255 - ramp;
    }
  }
  return pixels;
}

export async function encodeTestPicture(format: 'png' | 'jpeg' | 'webp', width: number, height: number, variant: number): Promise<Buffer> {
  const picture = sharp(testPicture(width, height, variant), { raw: { width, height, channels: 3 } });
  if (format === 'png') return await picture.png().toBuffer();
  if (format === 'jpeg') return await picture.jpeg({ quality: 90 }).toBuffer();
  return await picture.webp({ lossless: true }).toBuffer();
}
