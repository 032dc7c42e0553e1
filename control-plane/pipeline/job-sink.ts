import type { ClientPresence } from '../dispatch/cold-start-queue';
import type { Job, JobListener } from '../dispatch/job';
import type { RateLimitDecision } from '../rate-limits/rate-limit-decision';
import type { Usage } from '../../proto/worker/v1';

/**
 * Where a transport takes one admitted request's answer: an HTTP response (JSON or SSE), a
 * Responses turn written as typed events. The pipeline owns the request (admit, place and
 * dispatch, settle, close: `InferencePipeline.run`); the sink hears its job's events and
 * carries them to its client, and says when that side is done. It never meters: the ticket
 * meters every job from its terminal event before the sink hears it.
 */
export interface JobSink extends JobListener, ClientPresence {
  /** The request was admitted with this rate-limit state (the answer's headers); its job is sent next. */
  admitted(rateLimit: RateLimitDecision): void;
  /**
   * The job was sent with this sink as its listener: the sink may cancel it (the client left,
   * the deadline, a stall) and credit it (flow control). Resolves when the transport is done
   * with the request: with how long after the request arrived its first byte reached the
   * client (ms, 0 when not measured). Rejects with the error to render when the request failed
   * before its first byte.
   */
  carry(job: Job): Promise<number>;
}

/** What the pipeline knew when a request's answer ended (the request's log line). */
export interface RunSummary {
  /** Its tokens, once every job it sent has ended (an aborted stream's end later: undefined here). */
  readonly usage: Usage | undefined;
  /** How long after the request arrived its first byte reached the client (ms), 0 when not measured. */
  readonly firstByteMs: number;
}

/** Sends one job of a request with several (an embeddings request's engine batches): the ticket's `dispatch`. */
export interface JobDispatch {
  dispatch(listener: JobListener, body: Buffer): Job;
}

/** The transport of a request that fans out into several jobs: it sends them through `jobs` and answers once. */
export interface FanOutSink extends ClientPresence {
  admitted(rateLimit: RateLimitDecision): void;
  /** Sends the request's jobs through `jobs` and resolves when its answer is written; rejects with the error to render. */
  carry(jobs: JobDispatch): Promise<void>;
}
