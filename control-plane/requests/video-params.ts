import type { CatalogModel } from '../catalog/catalog';
import { AppError } from '../errors/app-error';
import type { FieldReader } from './field-reader';
import { parseSize, readGenerationControls, sortedSizes, type GenerationControls } from './media-model';
import { shortened } from '../errors/quote-value';

/** The job body of a video generation, as the agent receives it. */
export interface VideoJobParams extends GenerationControls {
  prompt: string;
  width: number;
  height: number;
  /** The size the client asked for (the Video object reports it). */
  size: string;
  fps: number;
  frames: number;
  /** The duration the client asked for, as a string (the Video object's `seconds`). */
  seconds: string;
  has_input_reference: boolean;
}

export const DURATION_TOLERANCE_SECONDS = 0.5;
const DEFAULT_FPS = 24;
const MAX_SECONDS = 120;

export type VideoRoute = 'videos' | 'videos/generations';

/**
 * The video rules of docs/api-contract.md#videos: (1) size in the model's list, else 422 `resolution_not_supported`
 * listing the sorted options; (2) a pinned model takes its native duration ±0.5 s and exactly
 * its native fps; (3) otherwise duration × fps is honoured with the frame count snapped to the
 * nearest 4n+1 (at least 5), and the JSON route also snaps width and height down to multiples
 * of 32. An omitted fps is the contract's default 24 on both routes, pinned models included: the
 * contract gives fps one default, so a pinned model whose native fps is not 24 answers
 * `fps_mismatch` (naming its fps) rather than quietly taking another value than the one asked.
 */
export function readVideoParams(fields: FieldReader, model: CatalogModel, route: VideoRoute, hasInputReference: boolean): VideoJobParams {
  const prompt = fields.string('prompt', { required: true })!;
  const sizeField = route === 'videos' ? 'size' : 'resolution';
  const durationField = route === 'videos' ? 'seconds' : 'duration';
  const requestedSize = route === 'videos' ? fields.string('size', { required: true, maxLength: 32 })! : fields.string('resolution', { maxLength: 32 }) ?? '720x1280';
  const requestedSeconds = route === 'videos'
    ? fields.decimal('seconds', 0.1, MAX_SECONDS, { required: true })!
    : fields.decimal('duration', 0.1, MAX_SECONDS) ?? 5.0;
  const pinned = model.videoSpec;
  const givenFps = fields.integer('fps', 1, 120);
  const fps = givenFps ?? DEFAULT_FPS;

  const dimensions = parseSize(requestedSize);
  if (!dimensions || !model.sizes.includes(requestedSize)) {
    throw new AppError('resolution_not_supported', `${sizeField} '${shortened(requestedSize)}' is not supported by ${model.id}; supported: ${sortedSizes(model.sizes).join(', ')}`, { param: sizeField });
  }
  if (pinned && Math.abs(requestedSeconds - pinned.durationSeconds) > DURATION_TOLERANCE_SECONDS) {
    throw new AppError('duration_mismatch',
      `${model.id} generates ${pinned.durationSeconds} s clips: ${durationField} must be within ${DURATION_TOLERANCE_SECONDS} s of ${pinned.durationSeconds} (got ${requestedSeconds})`,
      { param: durationField });
  }
  if (pinned && fps !== pinned.fps) {
    const got = givenFps === undefined ? `got ${fps}, the default when fps is omitted` : `got ${fps}`;
    throw new AppError('fps_mismatch', `${model.id} generates at ${pinned.fps} fps: fps must be ${pinned.fps} (${got})`, { param: 'fps' });
  }
  const clipSeconds = pinned ? pinned.durationSeconds : requestedSeconds;
  const snapToGrid = route === 'videos/generations';
  const params: VideoJobParams = {
    prompt,
    width: snapToGrid ? snapDown32(dimensions.width) : dimensions.width,
    height: snapToGrid ? snapDown32(dimensions.height) : dimensions.height,
    size: requestedSize,
    fps,
    frames: snapFrameCount(clipSeconds * fps),
    seconds: formatSeconds(requestedSeconds),
    has_input_reference: hasInputReference,
  };
  Object.assign(params, readGenerationControls(fields));
  return params;
}

/** Nearest frame count of the form 4n+1, at least 5 (ties round up). */
export function snapFrameCount(frames: number): number {
  return Math.max(5, 4 * Math.round((frames - 1) / 4) + 1);
}

export function snapDown32(pixels: number): number {
  return Math.max(32, Math.floor(pixels / 32) * 32);
}

function formatSeconds(seconds: number): string {
  return Number.isInteger(seconds) ? String(seconds) : String(Math.round(seconds * 1000) / 1000);
}
