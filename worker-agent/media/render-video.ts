import sharp from 'sharp';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { decodeImage } from './decode-image';
import { assertDimensions } from './media-dimensions';
import { mediaSeed } from './media-seed';
import { writeMjpegMp4 } from './mp4-writer';
import { blendWithPattern } from './pattern-blend';
import { SeededPattern } from './seeded-pattern';

export interface RenderVideoOptions {
  width: number;
  height: number;
  /** Frames per second, from 0.001 to 240; kept to a thousandth (the MP4 media clock ticks at fps × 1000). */
  fps: number;
  /** Exact number of frames in the file. */
  frames: number;
  prompt: string;
  /** @default derived from the prompt */
  seed?: number;
  /** PNG, JPEG or WebP the first frame starts from; later frames drift away from it. */
  inputReference?: Buffer;
  /** Called with 0, then with each whole percent up to 99 as frames are encoded; awaited. 100 is the caller's, once the file is delivered. */
  onProgress?: (percent: number) => void | Promise<void>;
  /** Checked between frames; rejects with the signal's reason (an AbortError by default). */
  signal?: AbortSignal;
}

export const VIDEO_FPS_RANGE = { min: 0.001, max: 240 } as const;
/** How recoloured a reference is on the first frame and on the last. */
const REFERENCE_STRENGTH = { first: 0.2, last: 0.85 } as const;
/** Motion JPEG is intra-only, so quality is per frame; 85 keeps the pattern free of visible blocking. */
const JPEG_QUALITY = 85;

/**
 * The CPU engine's video: an MP4 of Motion JPEG frames of an animated prompt- and
 * seed-derived pattern, byte-identical for equal options. Frames are produced one per event
 * loop turn so that a cancel (or a heartbeat) gets through while a long video renders.
 * Throws MediaInputError (field `input_reference`) for a reference it cannot decode.
 */
export async function renderVideo(options: RenderVideoOptions): Promise<Buffer> {
  const { width, height, fps, frames: frameCount, signal } = options;
  assertDimensions(width, height);
  assertTiming(fps, frameCount);
  signal?.throwIfAborted();
  const reference = options.inputReference === undefined ? undefined : await decodeImage(options.inputReference, 'input_reference', width, height);
  const pattern = new SeededPattern(mediaSeed('video', options.prompt, options.seed));
  let reported = -1;
  const report = async (percent: number) => {
    if (percent <= reported) return;
    reported = percent;
    await options.onProgress?.(percent);
  };
  await report(0);
  const frames: Buffer[] = [];
  for (let index = 0; index < frameCount; index += 1) {
    signal?.throwIfAborted();
    const progress = frameCount === 1 ? 0 : index / (frameCount - 1);
    const patternPixels = pattern.render(width, height, index / fps);
    const pixels = reference
      ? blendWithPattern(reference, patternPixels, REFERENCE_STRENGTH.first + (REFERENCE_STRENGTH.last - REFERENCE_STRENGTH.first) * progress)
      : patternPixels;
    frames.push(await sharp(pixels, { raw: { width, height, channels: 3 } }).jpeg({ quality: JPEG_QUALITY }).toBuffer());
    await report(Math.floor(((index + 1) * 99) / frameCount));
    await nextTurn();
  }
  signal?.throwIfAborted();
  return writeMjpegMp4({ width, height, fps, frames });
}

function assertTiming(fps: number, frames: number): void {
  if (!Number.isFinite(fps) || fps < VIDEO_FPS_RANGE.min || fps > VIDEO_FPS_RANGE.max) {
    throw new RangeError(`fps must be from ${VIDEO_FPS_RANGE.min} to ${VIDEO_FPS_RANGE.max}, got ${fps}`);
  }
  if (!Number.isInteger(frames) || frames < 1) throw new RangeError(`frames must be a positive integer, got ${frames}`);
}
