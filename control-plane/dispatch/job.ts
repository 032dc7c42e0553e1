import type { AdapterRef, EmbeddingSpec, InputFile, JobKind, UploadTarget, Usage } from '../../proto/worker/v1';

export interface DispatchRequest {
  deploymentId: string;
  kind: JobKind;
  /** The client's JSON body, passed to the engine untouched. */
  body: Buffer;
  stream: boolean;
  includeUsage: boolean;
  model: string;
  deadlineUnixMs: number;
  /** Media jobs: presigned inputs and upload targets, and whether outputs also come back inline. */
  inputs?: InputFile[];
  uploads?: UploadTarget[];
  inlineOutputs?: boolean;
  /** A shared-serving guest's job: only on priority-scheduling replicas, never retried elsewhere. */
  guest?: boolean;
  /**
   * A line of a batch: placed only into a slot idle now (control-plane/batches), never counted
   * as the owner's load (autoscaling), never retried elsewhere by the dispatcher (the batch
   * runner re-queues a lost line itself, at most once).
   */
  batch?: boolean;
  /**
   * Chat and completion jobs: the prefix-cache salt of the workspace the job is for (the owner's,
   * or a guest's), `Assign.cache_salt` (dispatch/cache-salts.ts). Jobs of different salts never
   * reuse each other's cached prompt prefix.
   */
  cacheSalt?: string;
  /** Embedding jobs: the model's vector size and input limit (`Assign.embedding`). */
  embedding?: EmbeddingSpec;
  /**
   * Streamed jobs: chunk bytes the agent may send beyond what the consumer has taken
   * (`Assign.stream_window_bytes`); the consumer reports what it took with `Job.consumed`.
   * Unset or 0: no window (the job streams as fast as the engine produces).
   */
  streamWindowBytes?: number;
  /** Relayed jobs: the replica the relaying server's routing chose (`RelayJob.replica_id`). */
  replicaId?: string;
  /**
   * The W3C trace context of the span that sends the job (`Assign.traceparent`), when tracing is
   * on: the agent's span for the job is its child (docs/tracing.md). Unset when tracing is off.
   */
  traceparent?: string;
  /**
   * A job addressed to a LoRA adapter (`Assign.adapter`, docs/adapters.md): placed only on a
   * replica whose Hello offered adapter slots, preferring one that holds `adapter.name`.
   * Unset: the base model.
   */
  adapter?: AdapterRef;
}

export interface JobFailure {
  code: string;
  message: string;
  engineStatus: number;
  engineBody: Buffer | null;
  usage: Usage | undefined;
}

/**
 * Callbacks of one job, called in event order; exactly one of `onCompleted`/`onFailed` ends
 * it. A plain object of methods (not promises or emitters) keeps the per-chunk cost at one call.
 */
export interface JobListener {
  onChunk(data: Buffer): void;
  onOutput(data: Buffer, contentType: string, objectKey: string): void;
  onCompleted(usage: Usage | undefined, finishReason: string): void;
  onFailed(failure: JobFailure): void;
  onProgress?(percent: number, stage: string): void;
  /**
   * The agent queued the job for a free slot (`queued`), or started one it had queued (not
   * `queued`): the two `accepted` events of a job that waited (a job that starts at once has
   * neither). The request's timeline and its queue-wait span are timed by them.
   */
  onAccepted?(queued: boolean): void;
}

/** Where a job runs; implemented by the agent connection that carries it. */
export interface JobCarrier {
  readonly replicaId: string;
  /** A relayed job's: the peer server that runs it (its span says where the job went before the replica is known). */
  readonly peerId?: string;
  cancelJob(job: Job, reason: string): void;
  /** The job's consumer took `bytes` more of its chunks: let the agent send that many more. */
  creditJob(job: Job, bytes: number): void;
}

export class Job {
  finished = false;
  /** Cancel was sent: output is dropped, but the terminal event still arrives with its usage. */
  canceled = false;
  /** True once any chunk or output reached the listener: from then on a retry is impossible. */
  produced = false;
  attempts = 1;
  /** performance.now() when the job was handed to its current carrier (latency figures). */
  assignedAt = 0;
  /** Why the routing policy chose its replica (text jobs of a deployment with a policy), for the request's trace. */
  routingReason: string | undefined = undefined;
  /** Chunk bytes the consumer took since the last credit. */
  private uncredited = 0;

  constructor(
    readonly id: string,
    readonly request: DispatchRequest,
    readonly listener: JobListener,
    public carrier: JobCarrier,
  ) {}

  get replicaId(): string {
    return this.carrier.replicaId;
  }

  /**
   * Stops the job on its agent. The listener gets no more output, only the terminal event
   * (usually `failed(canceled)` carrying the tokens generated so far, so it can be metered).
   */
  cancel(reason: string): void {
    if (this.finished || this.canceled) return;
    this.canceled = true;
    this.carrier.cancelJob(this, reason);
  }

  /**
   * The consumer took `bytes` of the job's chunks (written them to its client). Credit goes
   * back once half a window is taken, so a response shorter than that costs no extra message
   * and a long one one per half window.
   */
  consumed(bytes: number): void {
    const window = this.request.streamWindowBytes;
    if (!window) return;
    this.uncredited += bytes;
    if (this.uncredited * 2 < window) return;
    const credit = this.uncredited;
    this.uncredited = 0;
    this.credit(credit);
  }

  /** Passes credit to the agent as it is (a relayed job: the relaying server already coalesced it). */
  credit(bytes: number): void {
    if (!this.finished && !this.canceled) this.carrier.creditJob(this, bytes);
  }
}
