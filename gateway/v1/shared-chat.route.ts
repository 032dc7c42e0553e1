import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { InferencePipeline } from '../../control-plane/pipeline/inference-pipeline';
import { readBody } from '../http/read-body';
import type { RequestTrace } from '../http/request-id';
import { servedEndpoints } from './endpoint-table';
import { runTicket } from './run-ticket';
import type { TextRouteOptions } from './text-completion.route';
import type { StreamLimits } from './text-job-run';
import { parseTextRequest } from './text-request';

/** The metrics and log label of a guest request before its model is known. */
export const SHARED_MODEL_LABEL = 'shared';

/**
 * `POST /shared/v1/chat/completions` with `model: "shared/<model-id>"` and the guest's own
 * key: the same body, SSE, pass-through fields and rate-limit headers as a deployment's
 * endpoint, on a replica of any owner who shares that model, billed per token.
 */
export class SharedChatRoute {
  constructor(private readonly pipeline: InferencePipeline, private readonly options: TextRouteOptions & StreamLimits) {}

  /** Answers on the raw response; `labelled` learns the shared model once it is known (the metrics and log label). */
  async handle(request: IncomingMessage, response: ServerResponse, key: AuthenticatedKey, trace: RequestTrace, labelled: (label: string) => void): Promise<void> {
    const body = await readBody(request, this.options.maxBodyBytes);
    const textRequest = parseTextRequest(body, 'chat.completions');
    const ticket = await this.pipeline.admitShared(key, {
      endpoint: 'chat.completions', body, fields: textRequest.fields, model: textRequest.model, stream: textRequest.stream,
      includeUsage: textRequest.includeUsage, deadlineUnixMs: Date.now() + this.options.requestTimeoutMs,
      streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints,
    }, labelled);
    await runTicket(response, ticket, textRequest.stream, key, trace, this.options);
  }
}
