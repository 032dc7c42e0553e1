import type { Context } from 'koa';
import { type AuthenticatedKey, type Deployment, EmbeddingBatches, type FanOutSink, type InferencePort, type JobDispatch, parseEmbeddingsRequest, type RateLimitDecision, servedEndpoints, splitEmbeddingsRequest } from '../../control-plane/api/inference';
import { readBody } from '../http/read-body';
import { requestBudgetOf } from '../http/request-budget';
import { recordSummary, workTraceOfContext } from '../http/request-telemetry';
import { rateLimitHeaders } from '../http/rate-limit-headers';
import { onResponseClosed } from './http-text-sink';
import type { TextRouteOptions } from './text-completion.route';
import type { RouteEndpoints } from './route-endpoints';

/**
 * `POST /v1/embeddings` on a deployment endpoint: endpoint check → validate → the pipeline
 * runs it (admission, one job per engine batch, settled once with their summed usage), with
 * the answer reassembled in input order as its sink.
 */
export class EmbeddingsRoute {
  constructor(private readonly pipeline: InferencePort['pipeline'], private readonly options: TextRouteOptions) {}

  endpoints(): RouteEndpoints {
    return { deployment: { embeddings: (context, deployment, key) => this.handle(context, deployment, key) } };
  }

  async handle(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const model = this.pipeline.embeddingModel(deployment, servedEndpoints);
    const limits = model.embedding;
    const raw = await readBody(context.req, this.options.maxBodyBytes, requestBudgetOf(context));
    const request = parseEmbeddingsRequest(raw, model.id, limits);
    const timeoutMs = this.options.requestTimeoutMs;
    const sink: FanOutSink = {
      onLeft: (left) => onResponseClosed(context.res, left),
      admitted: (rateLimit: RateLimitDecision) => {
        const headers = rateLimitHeaders(rateLimit, key.rpmLimit, key.tpdLimit);
        for (let index = 0; index < headers.length; index += 2) context.set(headers[index], headers[index + 1]);
      },
      carry: async (jobs: JobDispatch) => {
        const batches = new EmbeddingBatches(jobs, splitEmbeddingsRequest(raw, request, limits.maxBatchInputs), timeoutMs);
        context.res.once('close', () => batches.cancel('client_disconnected'));
        const result = await batches.run();
        context.status = 200;
        context.type = 'application/json';
        context.body = result;
      },
    };
    recordSummary(context, await this.pipeline.runEmbeddings(key, deployment, model, { model: request.model, bodyBytes: raw.length, body: raw, deadlineUnixMs: Date.now() + timeoutMs, trace: workTraceOfContext(context) }, sink));
  }
}
