/**
 * Runs an image or video job: fetches its inputs through presigned GET links, lets the engine
 * produce the files, PUTs each to its presigned upload URL (the agent never holds storage
 * credentials) and reports them, inline as well when the client wants `b64_json`.
 */
import { request } from 'undici';
import type { Assign, JobEvent } from '../proto/worker/v1/index';
import type { Engine, MediaJob } from './engines/engine';
import { EngineFailure } from './engines/engine-failure';
import { parseObject } from './engines/engine-request';
import type { JobCancellation } from './job-cancellation';

export interface MediaJobIo {
  /** Queues a job event on the job's stream. */
  send(event: JobEvent): void;
}

/** Inputs are capped so a bad link cannot fill the agent's memory. */
const MAX_INPUT_BYTES = 64 * 1024 * 1024;
const MEDIA_KINDS = new Set(['JOB_KIND_IMAGE_GENERATION', 'JOB_KIND_IMAGE_EDIT', 'JOB_KIND_VIDEO_GENERATION']);

export function isMediaJob(assign: Assign): boolean {
  return MEDIA_KINDS.has(assign.kind);
}

export async function runMediaJob(engine: Engine, assign: Assign, io: MediaJobIo, cancellation: JobCancellation): Promise<void> {
  if (!engine.generateMedia) throw new EngineFailure('invalid_job', `the ${engine.kind} engine does not serve image or video jobs`);
  const signal = cancellation.signal;
  const inputs = new Map<string, Buffer>();
  for (const input of assign.inputs ?? []) inputs.set(input.name, await download(input.url, input.name, signal));
  const job: MediaJob = { jobId: assign.jobId, kind: assign.kind, model: assign.model, params: parseObject(assign.body), inputs };
  const produced = await engine.generateMedia(job, (percent, stage) => {
    if (!cancellation.aborted) io.send({ jobId: assign.jobId, progress: { percent: Math.max(0, Math.min(99, Math.floor(percent))), stage } });
  }, cancellation);
  const uploads = assign.uploads ?? [];
  if (uploads.length > 0 && produced.files.length !== uploads.length) {
    throw new EngineFailure('engine_error', `the engine produced ${produced.files.length} files for ${uploads.length} outputs`);
  }
  for (const [index, file] of produced.files.entries()) {
    const upload = uploads[index];
    if (upload) await uploadFile(upload.url, upload.headers, file, signal);
    io.send({
      jobId: assign.jobId,
      output: { data: assign.inlineOutputs ? file : Buffer.alloc(0), contentType: produced.contentType, objectKey: upload?.objectKey ?? '' },
    });
  }
}

async function download(url: string, name: string, signal: AbortSignal): Promise<Buffer> {
  try {
    const response = await request(url, { method: 'GET', signal });
    if (response.statusCode !== 200) {
      response.body.destroy();
      throw new Error(`HTTP ${response.statusCode}`);
    }
    // Counted as it arrives: a link that serves more than the cap must not fill the agent's memory first.
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body) {
      size += (chunk as Buffer).length;
      if (size > MAX_INPUT_BYTES) {
        response.body.destroy();
        throw new Error(`larger than ${MAX_INPUT_BYTES} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw new EngineFailure('engine_error', `could not read the job's ${name} input: ${(error as Error).message}`, { cause: error });
  }
}

async function uploadFile(url: string, headers: Record<string, string>, file: Buffer, signal: AbortSignal): Promise<void> {
  let status: number;
  let detail = '';
  try {
    const response = await request(url, { method: 'PUT', headers, body: file, signal });
    status = response.statusCode;
    detail = (await response.body.text()).slice(0, 300);
  } catch (error) {
    if (signal.aborted) throw signal.reason;
    throw new EngineFailure('storage_upload_failed', `could not upload an output: ${(error as Error).message}`, { cause: error });
  }
  if (status < 200 || status >= 300) {
    throw new EngineFailure('storage_upload_failed', `the output bucket refused an upload with HTTP ${status}${detail ? `: ${detail}` : ''}`);
  }
}
