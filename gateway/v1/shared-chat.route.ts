import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { InferencePipeline } from '../../control-plane/pipeline/inference-pipeline';
import type { PricedModel } from '../../control-plane/sharing/shared-pool';
import { NESTED, topLevelValues } from '../http/json-top-level';
import { readBody } from '../http/read-body';
import type { RequestTrace } from '../http/request-id';
import { servedEndpoints } from './endpoint-table';
import { runTicket } from './run-ticket';
import type { TextRouteOptions } from './text-completion.route';
import type { StreamLimits } from './text-job-run';
import { parseTextRequest } from './text-request';

/** The metrics and log label of a guest request before its model is known. */
export const SHARED_MODEL_LABEL = 'shared';

/** What the screen reads of a guest's body before parsing it. */
const SCANNED = ['model', 'max_tokens', 'max_completion_tokens', 'n'] as const;

/**
 * `POST /shared/v1/chat/completions` with `model: "shared/<model-id>"` and the guest's own
 * key: the same body, SSE, pass-through fields and rate-limit headers as a deployment's
 * endpoint, on a replica of any owner who shares that model, billed per token.
 *
 * Most guest attempts in a flood are refused (no idle slot, no credit), so a refusal must cost
 * next to nothing: the body is only scanned for its top-level `model`, `max_tokens`,
 * `max_completion_tokens` and `n` (json-top-level.ts), and the pipeline screens the attempt in
 * memory on those (model → pool → fair share → credit) before the body is parsed and
 * validated. A body the scan cannot read is parsed first, so it gets the parse's own 400.
 */
export class SharedChatRoute {
  constructor(private readonly pipeline: InferencePipeline, private readonly options: TextRouteOptions & StreamLimits) {}

  /** Answers on the raw response; `labelled` learns the shared model once it is known (the metrics and log label). */
  async handle(request: IncomingMessage, response: ServerResponse, key: AuthenticatedKey, trace: RequestTrace, labelled: (label: string) => void): Promise<void> {
    const body = await readBody(request, this.options.maxBodyBytes);
    const screened = this.screen(key, body, labelled);
    const textRequest = parseTextRequest(body, 'chat.completions');
    const ticket = await this.pipeline.admitShared(key, {
      endpoint: 'chat.completions', body, fields: textRequest.fields, model: textRequest.model, stream: textRequest.stream,
      includeUsage: textRequest.includeUsage, deadlineUnixMs: Date.now() + this.options.requestTimeoutMs,
      streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints,
    }, labelled, screened);
    await runTicket(response, ticket, textRequest.stream, key, trace, this.options);
  }

  /** The in-memory refusals on the scanned fields (throws them); undefined when the scan could not read the body. */
  private screen(key: AuthenticatedKey, body: Buffer, labelled: (label: string) => void): PricedModel | undefined {
    const values = topLevelValues(body, SCANNED);
    if (!values) return undefined;
    const model = values.get('model');
    // Not a string: the parse names the field (400) as it always did.
    if (model !== undefined && typeof model !== 'string') return undefined;
    const fields: Record<string, unknown> = {};
    for (const name of SCANNED) {
      const value = values.get(name);
      if (value !== undefined && value !== NESTED) fields[name] = value;
    }
    return this.pipeline.screenShared(key, { model, fields, bodyBytes: body.length }, labelled);
  }
}
