import type { ServerResponse } from 'node:http';
import { AppError } from '../../control-plane/api/errors';
import type { Job, JobListener } from '../../control-plane/api/inference';
import type { Usage } from '../../proto/worker/v1';
import { TextJobResponse, type JobOutcome } from './text-job-response';
import type { ResponseFlowOptions } from '../http/response-flow';

export interface TextRouteOptions {
  maxBodyBytes: number;
  requestTimeoutMs: number;
}

/** What a client that reads slower than its job produces may cost (gateway configuration). */
export interface StreamLimits {
  /** A client that takes no byte of its response for this long is gone: its job is canceled (`client_stalled`). */
  streamStallTimeoutMs: number;
  /** A streamed job's window: chunk bytes its agent may produce ahead of what the client took. */
  streamBufferBytes: number;
}

/**
 * Bytes waiting for one client beyond which it counts as stalled at once: twice the window, as
 * an agent honouring it may overshoot by one engine read and credit lags by half a window.
 * Only a producer that ignores the window (an agent older than flow control) reaches it.
 */
const BUFFER_LIMIT_WINDOWS = 2;

export interface TextJobRun {
  stream: boolean;
  /** Response headers (rate limits, request id); content headers are added when writing starts. */
  headers: string[];
  requestTimeoutMs: number;
  limits: StreamLimits;
  /** The request's tenant budget: bytes that wait for a slow client are held in it. */
  memory?: ResponseFlowOptions['memory'];
  /** Sends the job with this listener; throws (before any byte) when it cannot be placed. */
  dispatch(listener: JobListener): Job;
  /** The job's terminal event arrived (also after a cancel or the deadline): what to meter. */
  meter(outcome: JobOutcome, usage: Usage | undefined, job: Job): void;
}

/**
 * Runs one chat/completion job to the end on the raw response: relays its events as the client
 * reads them, fails it at the gateway deadline, cancels it when the client goes away or stops
 * reading (`client_stalled`: metered like a disconnect, from the terminal event's usage).
 * Resolves with the response once the HTTP side is settled; an error before the first byte is
 * thrown for the caller to render.
 */
export async function runTextJob(response: ServerResponse, run: TextJobRun): Promise<TextJobResponse> {
  let settle: (error?: AppError) => void = () => {};
  const settled = new Promise<AppError | undefined>((resolve) => (settle = resolve));
  let job: Job | undefined;
  const jobResponse = new TextJobResponse(response, run.stream, run.headers, {
    respond: (error) => settle(error),
    meter: (outcome, usage) => run.meter(outcome, usage, job!),
    consumed: (bytes) => job!.consumed(bytes),
    stalled: () => job!.cancel('client_stalled'),
  }, { stallTimeoutMs: run.limits.streamStallTimeoutMs, maxBufferedBytes: BUFFER_LIMIT_WINDOWS * run.limits.streamBufferBytes, memory: run.memory });
  job = run.dispatch(jobResponse);
  const dispatched = job;

  const timer = setTimeout(() => {
    jobResponse.fail(new AppError('gateway_timeout', `the request did not finish within ${run.requestTimeoutMs / 1000} s`));
    dispatched.cancel('deadline');
  }, run.requestTimeoutMs);
  response.once('close', () => {
    if (jobResponse.isEnded) return;
    jobResponse.abandon();
    dispatched.cancel('client_disconnected');
  });

  const error = await settled;
  clearTimeout(timer);
  if (error) throw error;
  return jobResponse;
}
