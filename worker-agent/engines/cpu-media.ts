/**
 * The CPU engine's image and video jobs: real, deterministic PNGs and MP4s (worker-agent/media).
 * With test controls on, a directive in the prompt simulates what GPUs do to media jobs:
 * `[cpu-engine:vram_exceeded]`, `[cpu-engine:crash]` (the agent dies like an OOM kill) and
 * `[cpu-engine:delay=<ms>]` (slow work, reporting progress while it waits).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { editImage, MediaInputError, renderImage, renderVideo } from '../media';
import type { JobCancellation } from '../job-cancellation';
import type { MediaFiles, MediaJob, ProgressReporter } from './engine';
import { EngineFailure } from './engine-failure';

interface Directives {
  vramExceeded: boolean;
  crash: boolean;
  delayMs: number;
}

const DIRECTIVE = /\[cpu-engine:([a-z_]+)(?:=(\d+))?\]/g;
const PROGRESS_TICK_MS = 100;

export async function generateCpuMedia(job: MediaJob, progress: ProgressReporter, cancellation: JobCancellation, testControls: boolean): Promise<MediaFiles> {
  const params = job.params;
  const prompt = stringParam(params, 'prompt');
  const directives = testControls ? directivesOf(prompt) : { vramExceeded: false, crash: false, delayMs: 0 };
  if (directives.crash) process.kill(process.pid, 'SIGKILL');
  if (directives.delayMs > 0) await waitWithProgress(directives.delayMs, progress, cancellation.signal);
  if (directives.vramExceeded) throw new EngineFailure('vram_exceeded', 'CUDA out of memory: tried to allocate 2.50 GiB (simulated by the CPU engine)');
  try {
    if (job.kind === 'JOB_KIND_VIDEO_GENERATION') return await video(job, prompt, progress, cancellation.signal);
    return await images(job, prompt, progress, cancellation);
  } catch (error) {
    if (error instanceof MediaInputError) {
      const body = { error: { message: error.message, type: 'invalid_request_error', param: error.field, code: 'invalid_image' } };
      throw new EngineFailure('engine_rejected', error.message, { engineStatus: 400, engineBody: Buffer.from(JSON.stringify(body)), cause: error });
    }
    throw error;
  }
}

async function images(job: MediaJob, prompt: string, progress: ProgressReporter, cancellation: JobCancellation): Promise<MediaFiles> {
  const count = integerParam(job.params, 'n', 1);
  const width = integerParam(job.params, 'width');
  const height = integerParam(job.params, 'height');
  const seed = optionalInteger(job.params, 'seed');
  const files: Buffer[] = [];
  for (let index = 0; index < count; index++) {
    if (cancellation.aborted) throw cancellation.reason;
    // Each image of a request differs, yet the whole request stays reproducible for a seed.
    const imageSeed = seed === undefined ? undefined : seed + index;
    const variant = seed === undefined && index > 0 ? `${prompt}\n#${index}` : prompt;
    files.push(job.kind === 'JOB_KIND_IMAGE_EDIT'
      ? await editImage({ image: required(job.inputs, 'image'), mask: job.inputs.get('mask'), prompt: variant, seed: imageSeed, width, height })
      : await renderImage({
        width, height, prompt: variant, seed: imageSeed, negativePrompt: optionalString(job.params, 'negative_prompt'),
        steps: optionalInteger(job.params, 'steps'), guidanceScale: optionalNumber(job.params, 'guidance_scale'),
      }));
    progress(((index + 1) * 99) / count, 'rendering');
  }
  return { files, contentType: 'image/png' };
}

async function video(job: MediaJob, prompt: string, progress: ProgressReporter, signal: AbortSignal): Promise<MediaFiles> {
  const file = await renderVideo({
    width: integerParam(job.params, 'width'), height: integerParam(job.params, 'height'),
    fps: numberParam(job.params, 'fps'), frames: integerParam(job.params, 'frames'),
    prompt, seed: optionalInteger(job.params, 'seed'), inputReference: job.inputs.get('input_reference'),
    onProgress: (percent) => progress(percent, 'rendering frames'), signal,
  });
  return { files: [file], contentType: 'video/mp4' };
}

function directivesOf(prompt: string): Directives {
  const directives: Directives = { vramExceeded: false, crash: false, delayMs: 0 };
  for (const [, name, value] of prompt.matchAll(DIRECTIVE)) {
    if (name === 'vram_exceeded') directives.vramExceeded = true;
    if (name === 'crash') directives.crash = true;
    if (name === 'delay') directives.delayMs = Number(value ?? 0);
  }
  return directives;
}

async function waitWithProgress(delayMs: number, progress: ProgressReporter, signal: AbortSignal): Promise<void> {
  const startedAt = Date.now();
  while (Date.now() - startedAt < delayMs) {
    await sleep(Math.min(PROGRESS_TICK_MS, delayMs - (Date.now() - startedAt)), undefined, { signal });
    progress(((Date.now() - startedAt) / delayMs) * 50, 'warming up');
  }
}

function required(inputs: ReadonlyMap<string, Buffer>, name: string): Buffer {
  const input = inputs.get(name);
  if (!input) throw new EngineFailure('invalid_job', `the job has no ${name} input`);
  return input;
}

function stringParam(params: Record<string, unknown>, name: string): string {
  const value = params[name];
  if (typeof value !== 'string') throw new EngineFailure('invalid_job', `job parameter ${name} must be a string`);
  return value;
}

function numberParam(params: Record<string, unknown>, name: string): number {
  const value = params[name];
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new EngineFailure('invalid_job', `job parameter ${name} must be a number`);
  return value;
}

function integerParam(params: Record<string, unknown>, name: string, fallback?: number): number {
  if (params[name] === undefined && fallback !== undefined) return fallback;
  const value = numberParam(params, name);
  if (!Number.isInteger(value) || value < 1) throw new EngineFailure('invalid_job', `job parameter ${name} must be a positive integer`);
  return value;
}

const optionalNumber = (params: Record<string, unknown>, name: string) => (params[name] === undefined ? undefined : numberParam(params, name));
const optionalInteger = (params: Record<string, unknown>, name: string) => (params[name] === undefined ? undefined : Math.trunc(numberParam(params, name)));
const optionalString = (params: Record<string, unknown>, name: string) => (typeof params[name] === 'string' ? (params[name] as string) : undefined);
