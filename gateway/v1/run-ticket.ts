import type { ServerResponse } from 'node:http';
import type { AuthenticatedKey, WorkTicket } from '../../control-plane/api/inference';
import type { RequestTrace } from '../http/request-id';
import { rateLimitHeaders } from '../http/rate-limit-headers';
import { runTextJob, type StreamLimits, type TextJobRun, type TextRouteOptions } from './text-job-run';

/**
 * Runs an admitted chat or completions request on the raw response: its job relayed as the
 * client reads it, settled from the terminal event, its holds given back if it never ran.
 */
export async function runTicket(
  response: ServerResponse, ticket: WorkTicket, stream: boolean, key: AuthenticatedKey, trace: RequestTrace, options: TextRouteOptions & StreamLimits,
  memory?: TextJobRun['memory'],
): Promise<void> {
  const headers = rateLimitHeaders(ticket.rateLimit, key.rpmLimit, key.tpdLimit);
  headers.push('x-request-id', trace.id);
  try {
    const jobResponse = await runTextJob(response, {
      stream, headers, requestTimeoutMs: options.requestTimeoutMs, limits: options, memory,
      dispatch: (listener) => ticket.dispatch(listener),
      meter: (outcome, usage, job) => ticket.settle(outcome, usage, job.replicaId),
    });
    if (jobResponse.firstByteAt) ticket.firstToken(jobResponse.firstByteAt - trace.receivedAt);
  } finally {
    ticket.close();
  }
}
