import sharp from 'sharp';
import { editImage, MediaInputError, pngSize } from '../../../worker-agent/media';
import { decodeRgb, encodeTestPicture, lumaCorrelation, meanAbsoluteDifference, testPicture } from './support/pixels';

/** A mask whose left half is fully transparent (edit here) and right half opaque (keep). */
async function leftHalfMask(width: number, height: number): Promise<Buffer> {
  const rgba = Buffer.alloc(width * height * 4, 255);
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width / 2; x += 1) rgba[(y * width + x) * 4 + 3] = 0;
  }
  return await sharp(rgba, { raw: { width, height, channels: 4 } }).png().toBuffer();
}

function pixelsInColumns(image: { data: Buffer; width: number; height: number }, from: number, to: number): Buffer {
  const rows: Buffer[] = [];
  for (let y = 0; y < image.height; y += 1) rows.push(image.data.subarray((y * image.width + from) * 3, (y * image.width + to) * 3));
  return Buffer.concat(rows);
}

describe('editImage', () => {
  test.each(['png', 'jpeg', 'webp'] as const)('edits a %s input into a PNG of the requested size', async (format) => {
    const image = await encodeTestPicture(format, 300, 200, 0);
    const edited = await editImage({ image, prompt: 'make it autumn', seed: 5, width: 256, height: 192 });
    expect(pngSize(edited)).toEqual({ width: 256, height: 192 });
    expect((await sharp(edited).metadata()).format).toBe('png');
  });

  test('changes the picture visibly but stays closer to it than to an unrelated picture', async () => {
    const image = await encodeTestPicture('png', 300, 200, 0);
    const unrelated = await encodeTestPicture('png', 300, 200, 1);
    const size = { width: 240, height: 240 };
    const edited = await decodeRgb(await editImage({ image, prompt: 'make it autumn', seed: 5, ...size }));
    const resizedInput = await decodeRgb(image, size);
    const resizedUnrelated = await decodeRgb(unrelated, size);
    const toInput = meanAbsoluteDifference(edited.data, resizedInput.data);
    expect(toInput).toBeGreaterThan(15);
    const toUnrelated = meanAbsoluteDifference(edited.data, resizedUnrelated.data);
    const [correlationToInput, correlationToUnrelated] = [lumaCorrelation(edited.data, resizedInput.data), lumaCorrelation(edited.data, resizedUnrelated.data)];
    expect(toInput).toBeLessThan(toUnrelated);
    // The light and shade survive the recolouring: luma follows the input, not the other picture.
    expect(correlationToInput).toBeGreaterThan(0.8);
    expect(correlationToInput).toBeGreaterThan(correlationToUnrelated + 0.3);
  });

  test('is deterministic and depends on prompt and seed', async () => {
    const image = await encodeTestPicture('jpeg', 120, 90, 0);
    const options = { image, prompt: 'neon', seed: 1, width: 96, height: 96 };
    const first = await editImage(options);
    expect(first.equals(await editImage({ ...options }))).toBe(true);
    expect(first.equals(await editImage({ ...options, seed: 2 }))).toBe(false);
    expect(first.equals(await editImage({ ...options, prompt: 'sepia' }))).toBe(false);
  });

  test.each([
    ['the same size as the image', 128],
    ['a different size, scaled to the target', 64],
  ])('with a mask of %s, changes only the transparent pixels', async (_, maskSize) => {
    const image = await encodeTestPicture('png', 128, 128, 0);
    const edited = await decodeRgb(await editImage({ image, mask: await leftHalfMask(maskSize, maskSize), prompt: 'fill', seed: 3, width: 128, height: 128 }));
    const original = { data: testPicture(128, 128, 0), width: 128, height: 128 };
    expect(pixelsInColumns(edited, 64, 128).equals(pixelsInColumns(original, 64, 128))).toBe(true);
    expect(meanAbsoluteDifference(pixelsInColumns(edited, 0, 64), pixelsInColumns(original, 0, 64))).toBeGreaterThan(15);
  });

  test.each([
    ['undecodable image bytes', { image: Buffer.from('definitely not an image') }, 'image', /image could not be decoded/],
    ['an empty image', { image: Buffer.alloc(0) }, 'image', /image could not be decoded/],
    ['a GIF image', { gif: true }, 'image', /image must be a PNG, JPEG or WebP image, got gif/],
    ['undecodable mask bytes', { mask: Buffer.from('not a mask') }, 'mask', /mask could not be decoded/],
    ['a mask without alpha', { jpegMask: true }, 'mask', /mask must have an alpha channel/],
  ])('rejects %s with a MediaInputError naming the field', async (_, input: Record<string, unknown>, field, message) => {
    const picture = await encodeTestPicture('png', 32, 32, 0);
    const image = input.gif ? await sharp(picture).gif().toBuffer() : (input.image as Buffer | undefined) ?? picture;
    const mask = input.jpegMask ? await encodeTestPicture('jpeg', 32, 32, 1) : (input.mask as Buffer | undefined);
    const failure = editImage({ image, mask, prompt: 'x', width: 32, height: 32 });
    await expect(failure).rejects.toBeInstanceOf(MediaInputError);
    await expect(failure).rejects.toMatchObject({ field, message: expect.stringMatching(message) });
  });

  test('reports a truncated image as the client\'s input', async () => {
    const image = await encodeTestPicture('jpeg', 200, 200, 0);
    const failure = editImage({ image: image.subarray(0, image.length / 2), prompt: 'x', width: 64, height: 64 });
    await expect(failure).rejects.toMatchObject({ name: 'MediaInputError', field: 'image' });
  });
});
