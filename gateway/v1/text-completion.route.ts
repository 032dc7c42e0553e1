import type { IncomingMessage, ServerResponse } from 'node:http';
import { type AuthenticatedKey, type Deployment, type InferencePort, parseTextRequest, type RunSummary, servedEndpoints, type TextEndpoint } from '../../control-plane/api/inference';
import { readBody } from '../http/read-body';
import type { RequestBudget } from '../http/request-budget';
import type { RequestTrace } from '../http/request-id';
import { HttpTextSink, type StreamLimits, type TextRouteOptions } from './http-text-sink';
import { workTraceOf } from '../http/request-span';

export type { TextRouteOptions };

/**
 * `POST /v1/chat/completions` and `POST /v1/completions` on a deployment endpoint: read and
 * validate the body, and run it through the pipeline with the response as its sink.
 */
export class TextCompletionRoute {
  constructor(private readonly pipeline: InferencePort['pipeline'], private readonly options: TextRouteOptions & StreamLimits) {}

  /**
   * Answers on the raw response (the gateway's fast lane calls this without Koa); an error
   * thrown before the first byte is the caller's to render.
   */
  async handle(request: IncomingMessage, response: ServerResponse, deployment: Deployment, key: AuthenticatedKey, endpoint: TextEndpoint, trace: RequestTrace, held: RequestBudget): Promise<RunSummary> {
    const body = await readBody(request, this.options.maxBodyBytes, held);
    return await this.handleBody(response, body, deployment, key, endpoint, trace, held);
  }

  /** `handle` with the body already read (the workspace base URL reads it to find the deployment). */
  async handleBody(response: ServerResponse, body: Buffer, deployment: Deployment, key: AuthenticatedKey, endpoint: TextEndpoint, trace: RequestTrace, held: RequestBudget): Promise<RunSummary> {
    const textRequest = parseTextRequest(body, endpoint);
    return await this.pipeline.runText(key, deployment, {
      endpoint, body, fields: textRequest.fields, model: textRequest.model, stream: textRequest.stream, includeUsage: textRequest.includeUsage,
      deadlineUnixMs: Date.now() + this.options.requestTimeoutMs, streamWindowBytes: this.options.streamBufferBytes, servedBy: servedEndpoints, trace: workTraceOf(trace.id, trace.span),
    }, new HttpTextSink(response, textRequest.stream, key, trace, { requestTimeoutMs: this.options.requestTimeoutMs, limits: this.options, memory: held }));
  }
}
