import sharp from 'sharp';
import { MediaInputError, pngSize, renderImage } from '../../../worker-agent/media';
import { decodeRgb, meanAbsoluteDifference } from './support/pixels';

describe('renderImage', () => {
  test('writes an RGB PNG of exactly the requested size', async () => {
    const png = await renderImage({ width: 320, height: 200, prompt: 'a lighthouse at dusk', seed: 1 });
    const metadata = await sharp(png).metadata();
    expect(metadata).toMatchObject({ format: 'png', width: 320, height: 200, channels: 3, hasAlpha: false });
    expect(pngSize(png)).toEqual({ width: 320, height: 200 });
  });

  test('is byte-identical for equal options, with or without a seed', async () => {
    const options = { width: 128, height: 96, prompt: 'a red fox', seed: 42, negativePrompt: 'blurry', steps: 20, guidanceScale: 7 };
    expect((await renderImage(options)).equals(await renderImage({ ...options }))).toBe(true);
    const unseeded = { width: 64, height: 64, prompt: 'a red fox' };
    expect((await renderImage(unseeded)).equals(await renderImage(unseeded))).toBe(true);
  });

  test('draws different pixels for another seed or prompt', async () => {
    const base = await decodeRgb(await renderImage({ width: 128, height: 128, prompt: 'a red fox', seed: 1 }));
    const otherSeed = await decodeRgb(await renderImage({ width: 128, height: 128, prompt: 'a red fox', seed: 2 }));
    const otherPrompt = await decodeRgb(await renderImage({ width: 128, height: 128, prompt: 'a blue whale', seed: 1 }));
    expect(meanAbsoluteDifference(base.data, otherSeed.data)).toBeGreaterThan(10);
    expect(meanAbsoluteDifference(base.data, otherPrompt.data)).toBeGreaterThan(10);
  });

  test('looks like a picture rather than a flat fill', async () => {
    const { data } = await decodeRgb(await renderImage({ width: 256, height: 256, prompt: 'anything', seed: 3 }));
    const distinctColours = new Set<number>();
    for (let at = 0; at < data.length; at += 3) distinctColours.add((data[at] << 16) | (data[at + 1] << 8) | data[at + 2]);
    expect(distinctColours.size).toBeGreaterThan(200);
  });

  // Its speed (~40 ms here) is a benchmark's business, not a timed assertion in npm test.
  test('renders 1024x1024', async () => {
    const png = await renderImage({ width: 1024, height: 1024, prompt: 'a large picture', seed: 9 });
    expect(pngSize(png)).toEqual({ width: 1024, height: 1024 });
  });

  test('rejects sizes it cannot render', async () => {
    await expect(renderImage({ width: 0, height: 64, prompt: 'x' })).rejects.toThrow(RangeError);
    await expect(renderImage({ width: 64.5, height: 64, prompt: 'x' })).rejects.toThrow(/width must be an integer/);
  });
});

describe('pngSize', () => {
  test('names the field when the bytes are not a PNG', () => {
    const error = captureError(() => pngSize(Buffer.from('GIF89a not a png at all'), 'mask'));
    expect(error).toBeInstanceOf(MediaInputError);
    expect(error).toMatchObject({ field: 'mask', message: 'mask is not a PNG image' });
  });
});

function captureError(action: () => unknown): unknown {
  try {
    action();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}
