/**
 * Image jobs on an OpenAI-compatible image engine (`/v1/images/generations`, `/v1/images/edits`),
 * asking for `b64_json` so the agent holds the bytes it must upload. The platform's extension
 * fields (`negative_prompt`, `seed`, `steps`, `guidance_scale`) are passed along; engines that
 * do not know them ignore them, as OpenAI-style servers do.
 */
import sharp from 'sharp';
import { FormData, type Dispatcher } from 'undici';
import type { JobCancellation } from '../job-cancellation';
import type { MediaFiles, MediaJob } from './engine';
import { EngineFailure } from './engine-failure';
import { parseJsonText } from '../../common/json-nesting';

export interface ImageEngineTarget {
  request(options: Dispatcher.RequestOptions): Promise<Dispatcher.ResponseData>;
  readonly basePath: string;
  readonly headers: Record<string, string>;
  readonly engineModel: string | undefined;
  readonly url: string;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
const OUT_OF_MEMORY = /out of memory|\bOOM\b|CUDA error/i;
const EXTENSIONS = ['negative_prompt', 'seed', 'steps', 'guidance_scale'] as const;

export async function generateOpenAiImages(engine: ImageEngineTarget, job: MediaJob, cancellation: JobCancellation): Promise<MediaFiles> {
  if (job.kind === 'JOB_KIND_VIDEO_GENERATION') {
    throw new EngineFailure('invalid_job', 'the openai engine adapter serves text and image jobs; video engines need their own adapter');
  }
  const params = job.params;
  const fields: Record<string, unknown> = {
    model: engine.engineModel ?? job.model, prompt: params.prompt, n: params.n ?? 1, size: params.size, response_format: 'b64_json',
  };
  for (const name of EXTENSIONS) if (params[name] !== undefined) fields[name] = params[name];
  const signal = cancellation.signal;
  let response: Dispatcher.ResponseData;
  try {
    response = job.kind === 'JOB_KIND_IMAGE_EDIT'
      ? await engine.request({ method: 'POST', path: `${engine.basePath}/v1/images/edits`, headers: withoutContentType(engine.headers), body: editForm(fields, job.inputs), signal })
      : await engine.request({ method: 'POST', path: `${engine.basePath}/v1/images/generations`, headers: engine.headers, body: JSON.stringify(fields), signal });
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw new EngineFailure('engine_unavailable', `image engine at ${engine.url} could not be reached: ${(error as Error).message}`, { cause: error });
  }
  const body = Buffer.from(await response.body.arrayBuffer());
  if (response.statusCode >= 400) throw failureOf(response.statusCode, body);
  let images: Array<{ b64_json?: unknown }>;
  try {
    images = (parseJsonText(body) as { data?: Array<{ b64_json?: unknown }> }).data ?? [];
  } catch (error) {
    throw new EngineFailure('engine_error', 'the image engine answered with a body that is not JSON', { cause: error });
  }
  const files = await Promise.all(images.map(async (image, index) => {
    if (typeof image.b64_json !== 'string') throw new EngineFailure('engine_error', `image ${index} of the engine's answer has no b64_json`);
    return await asPng(Buffer.from(image.b64_json, 'base64'));
  }));
  return { files, contentType: 'image/png' };
}

function editForm(fields: Record<string, unknown>, inputs: ReadonlyMap<string, Buffer>): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) form.append(name, String(value));
  for (const name of ['image', 'mask']) {
    const input = inputs.get(name);
    if (input) form.append(name, new Blob([new Uint8Array(input)]), `${name}.png`);
  }
  return form;
}

/** Outputs are stored as PNG whatever the engine encoded (the upload target says image/png). */
async function asPng(image: Buffer): Promise<Buffer> {
  if (image.subarray(0, 8).equals(PNG_SIGNATURE)) return image;
  try {
    return await sharp(image).png().toBuffer();
  } catch (error) {
    throw new EngineFailure('engine_error', 'the image engine returned bytes that are not an image', { cause: error });
  }
}

function failureOf(status: number, body: Buffer): EngineFailure {
  const text = body.toString('utf8').slice(0, 2_000);
  if (OUT_OF_MEMORY.test(text)) return new EngineFailure('vram_exceeded', `the image engine ran out of GPU memory: ${text.slice(0, 300)}`, { engineStatus: status, engineBody: body });
  if (status < 500) return new EngineFailure('engine_rejected', `the image engine refused the request (${status}): ${text.slice(0, 300)}`, { engineStatus: status, engineBody: body });
  return new EngineFailure('engine_error', `the image engine failed (${status}): ${text.slice(0, 300)}`, { engineStatus: status, engineBody: body });
}

function withoutContentType(headers: Record<string, string>): Record<string, string> {
  const { 'content-type': _ignored, ...rest } = headers;
  return rest;
}
