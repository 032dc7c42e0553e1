import type { Job, JobFailure, JobListener } from '../dispatch/job';
import { AppError } from '../errors/app-error';
import type { JobDispatch } from '../pipeline/job-sink';
import { jobFailureError } from './openai-error';
import { assembleEmbeddingLists } from './embedding-lists';
import type { EmbeddingsRequest } from './embeddings-request';

/** One engine call's share of an embeddings request: `count` inputs starting at `offset`. */
export interface EmbeddingBatch {
  offset: number;
  count: number;
  /** The job body: the client's bytes when the request is one batch, else a rebuilt body. */
  body: Buffer;
}

/**
 * The request as engine-sized batches. A request that fits one batch keeps the client's bytes
 * exactly; a larger one is cut into bodies with the same fields and a slice of `input`.
 */
export function splitEmbeddingsRequest(raw: Buffer, request: EmbeddingsRequest, maxBatchInputs: number): EmbeddingBatch[] {
  const count = request.inputs.length;
  if (count <= maxBatchInputs) return [{ offset: 0, count, body: raw }];
  const batches: EmbeddingBatch[] = [];
  for (let offset = 0; offset < count; offset += maxBatchInputs) {
    const input = request.inputs.slice(offset, offset + maxBatchInputs);
    batches.push({ offset, count: input.length, body: Buffer.from(JSON.stringify({ ...request.fields, input })) });
  }
  return batches;
}


/**
 * Batches of one request in flight at once. Enough to keep a few replicas (or one engine's
 * continuous batching) busy with a 2048-input request, without one request taking every slot.
 */
export const MAX_BATCHES_IN_FLIGHT = 4;

/**
 * Runs the batches of one embeddings request as jobs and puts the answers back in input order.
 * The first failure, the deadline or a cancel stops the rest; nothing partial is returned.
 */
export class EmbeddingBatches {
  canceled = false;
  private readonly running = new Set<Job>();
  private stopped: AppError | undefined;
  /** Set by the promise below (a field initialised with an arrow would pin the request in old space: docs/performance.md). */
  private rejectStopped: ((error: AppError) => void) | undefined;
  private readonly stoppedPromise = new Promise<never>((_resolve, reject) => (this.rejectStopped = reject));

  constructor(
    private readonly jobs: JobDispatch,
    private readonly batches: readonly EmbeddingBatch[],
    private readonly timeoutMs: number,
  ) {
    this.stoppedPromise.catch(() => {});
  }

  /** Resolves with the response body (the pipeline's ticket meters each job from its terminal event). */
  async run(): Promise<Buffer> {
    const outputs: Buffer[] = new Array(this.batches.length);
    const timer = setTimeout(() => this.stop(new AppError('gateway_timeout', `the request did not finish within ${this.timeoutMs / 1000} s`), 'deadline'), this.timeoutMs);
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < this.batches.length && !this.stopped) {
        const index = next++;
        outputs[index] = await Promise.race([this.runBatch(this.batches[index]), this.stoppedPromise]);
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(MAX_BATCHES_IN_FLIGHT, this.batches.length) }, worker));
    } catch (error) {
      if (error instanceof AppError) this.stop(error, 'batch_failed');
      throw this.stopped ?? error;
    } finally {
      clearTimeout(timer);
    }
    if (this.stopped) throw this.stopped;
    return this.batches.length === 1 ? outputs[0] : assembleEmbeddingLists(this.batches, outputs);
  }

  /** The client went away: cancel what still runs. */
  cancel(reason: string): void {
    if (this.stopped) return;
    this.canceled = true;
    this.stop(new AppError('upstream_error', `canceled: ${reason}`), reason);
  }

  private stop(error: AppError, reason: string): void {
    if (this.stopped) return;
    this.stopped = error;
    for (const job of this.running) job.cancel(reason);
    this.rejectStopped!(error);
  }

  private runBatch(batch: EmbeddingBatch): Promise<Buffer> {
    return new Promise<Buffer>((resolve, reject) => {
      let output: Buffer | undefined;
      let job: Job | undefined;
      const listener: JobListener = {
        onChunk: () => {},
        onOutput: (data) => (output = data),
        onCompleted: () => {
          if (job) this.running.delete(job);
          if (output) resolve(output);
          else reject(new AppError('upstream_error', 'the engine answered the embeddings job without a body'));
        },
        onFailed: (failure) => {
          if (job) this.running.delete(job);
          reject(batchError(failure, batch, this.batches.length > 1));
        },
      };
      job = this.jobs.dispatch(listener, batch.body);
      if (!job.finished) this.running.add(job);
    });
  }
}

const INPUT_INDEX = /\binput\[(\d+)\]/g;

/**
 * An engine's refusal names inputs by their index in its batch; the client knows them by
 * their index in the request, so `input[i]` is renumbered and becomes the error's `param`.
 */
function batchError(failure: JobFailure, batch: EmbeddingBatch, split: boolean): AppError {
  const error = jobFailureError(failure);
  if (failure.code !== 'invalid_job') return error;
  const message = split ? error.message.replace(INPUT_INDEX, (_match, index: string) => `input[${batch.offset + Number(index)}]`) : error.message;
  const param = /\binput\[\d+\]/.exec(message)?.[0] ?? 'input';
  return new AppError('invalid_request', message, { param, cause: error });
}
