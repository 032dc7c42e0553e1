import type { Context } from 'koa';
import { type AuthenticatedKey, type Deployment, EmbeddingBatches, type InferencePort, parseEmbeddingsRequest, servedEndpoints, splitEmbeddingsRequest } from '../../control-plane/api/inference';
import type { Usage } from '../../proto/worker/v1';
import { readBody } from '../http/read-body';
import { requestBudgetOf } from '../http/request-budget';
import { rateLimitHeaders } from '../http/rate-limit-headers';
import type { TextRouteOptions } from './text-completion.route';

/**
 * `POST /v1/embeddings` on a deployment endpoint: endpoint check → validate → admission
 * (pipeline) → one job per engine batch → reassemble in input order → settle once.
 */
export class EmbeddingsRoute {
  constructor(private readonly pipeline: InferencePort['pipeline'], private readonly options: TextRouteOptions) {}

  async handle(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const model = this.pipeline.embeddingModel(deployment, servedEndpoints);
    const limits = model.embedding;
    const raw = await readBody(context.req, this.options.maxBodyBytes, requestBudgetOf(context));
    const request = parseEmbeddingsRequest(raw, model.id, limits);
    const ticket = await this.pipeline.admitEmbeddings(key, deployment, model, {
      model: request.model, bodyBytes: raw.length, deadlineUnixMs: Date.now() + this.options.requestTimeoutMs,
    });
    const headers = rateLimitHeaders(ticket.rateLimit, key.rpmLimit, key.tpdLimit);
    const batches = new EmbeddingBatches(ticket, splitEmbeddingsRequest(raw, request, limits.maxBatchInputs), this.options.requestTimeoutMs);
    context.res.once('close', () => batches.cancel('client_disconnected'));
    let usage: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
    let status: 'succeeded' | 'failed' | 'canceled' = 'failed';
    try {
      const result = await batches.run((batchUsage) => {
        usage = addUsage(usage, batchUsage);
      });
      status = 'succeeded';
      for (let index = 0; index < headers.length; index += 2) context.set(headers[index], headers[index + 1]);
      context.status = 200;
      context.type = 'application/json';
      context.body = result;
    } catch (error) {
      if (batches.canceled) status = 'canceled';
      throw error;
    } finally {
      // Every batch has ended (run waits for them or canceled them): the request is settled here, once.
      ticket.settle(status, usage, batches.firstReplicaId);
    }
  }
}

function addUsage(total: Usage, more: Usage): Usage {
  return {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: 0,
    totalTokens: total.totalTokens + more.totalTokens,
  };
}
