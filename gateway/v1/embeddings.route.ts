import type { Context } from 'koa';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { CatalogModel } from '../../control-plane/catalog/catalog';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import type { DispatchRequest } from '../../control-plane/dispatch/job';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import type { Usage } from '../../proto/worker/v1';
import { readBody } from '../http/read-body';
import { parseEmbeddingsRequest, type EmbeddingsRequest } from './embeddings-request';
import { EmbeddingBatches, type EmbeddingBatch } from './embedding-batches';
import { rateLimitHeaders } from './rate-limit-headers';
import { servedEndpoints } from './endpoint-table';
import type { TextRouteOptions } from './text-completion.route';
import { shortened } from '../../control-plane/errors/quote-value';
import { refuseWithoutCredit } from '../../control-plane/pipeline/admission';

/**
 * `POST /v1/embeddings` on a deployment endpoint: endpoint check → validate → model check →
 * paused check → rate limit → one job per engine batch → reassemble in input order → meter.
 */
export class EmbeddingsRoute {
  constructor(private readonly controlPlane: ControlPlane, private readonly options: TextRouteOptions) {}

  async handle(context: Context, deployment: Deployment, key: AuthenticatedKey): Promise<void> {
    const startedAt = Date.now();
    const model = this.embeddingModel(deployment);
    const limits = model.embedding!;
    const raw = await readBody(context.req, this.options.maxBodyBytes);
    const request = parseEmbeddingsRequest(raw, model.id, limits);
    if (request.model !== undefined && request.model !== deployment.modelId) {
      throw new AppError('model_mismatch', `model '${shortened(request.model)}' is not served here; this endpoint serves '${deployment.modelId}' (the field may be omitted)`, { param: 'model' });
    }
    refuseWithoutCredit(key);
    if (deployment.status === 'Paused') {
      throw new AppError('deployment_paused', 'this deployment is paused; resume it to serve requests', { retryAfterSeconds: 60 });
    }
    // No input has more tokens than bytes: the body's size bounds what TPD must hold.
    const decision = await this.controlPlane.rateLimiter.admit(key, raw.length);
    const headers = rateLimitHeaders(decision, key.rpmLimit, key.tpdLimit);

    const template: Omit<DispatchRequest, 'body'> = {
      deploymentId: deployment.id, kind: 'JOB_KIND_EMBEDDING', stream: false, includeUsage: false, model: deployment.modelId,
      deadlineUnixMs: startedAt + this.options.requestTimeoutMs,
      embedding: { dimensions: limits.dimensions, maxInputTokens: limits.maxInputTokens },
    };
    const batches = new EmbeddingBatches(this.controlPlane.jobs, template, splitRequest(raw, request, limits.maxBatchInputs), this.options.requestTimeoutMs);
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
      this.controlPlane.rateLimiter.settle(decision.hold, usage.totalTokens);
      this.controlPlane.usage.record({
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: deployment.id, replicaId: batches.firstReplicaId,
        endpoint: 'embeddings', status, stream: false, promptTokens: usage.promptTokens, completionTokens: 0,
        totalTokens: usage.totalTokens, latencyMs: Date.now() - startedAt, createdAt: new Date(startedAt),
      });
      if (usage.totalTokens > 0) this.controlPlane.metrics.recordTokens(deployment.id, usage.promptTokens, 0);
    }
  }

  /** The deployment's catalog entry, if it embeds; otherwise a 400 that says what it serves. */
  private embeddingModel(deployment: Deployment): CatalogModel {
    const model = this.controlPlane.catalog.find(deployment.modelId);
    if (!model) throw new AppError('model_not_found', `model '${deployment.modelId}' of this deployment is no longer in the catalog`);
    if (model.task !== 'embedding' || !model.embedding) {
      throw new AppError('unsupported_endpoint', `'${model.id}' is not an embedding model; this deployment serves ${servedEndpoints(model)} (and GET /v1/models)`);
    }
    return model;
  }
}

/**
 * The request as engine-sized batches. A request that fits one batch keeps the client's bytes
 * exactly; a larger one is cut into bodies with the same fields and a slice of `input`.
 */
function splitRequest(raw: Buffer, request: EmbeddingsRequest, maxBatchInputs: number): EmbeddingBatch[] {
  const count = request.inputs.length;
  if (count <= maxBatchInputs) return [{ offset: 0, count, body: raw }];
  const batches: EmbeddingBatch[] = [];
  for (let offset = 0; offset < count; offset += maxBatchInputs) {
    const input = request.inputs.slice(offset, offset + maxBatchInputs);
    batches.push({ offset, count: input.length, body: Buffer.from(JSON.stringify({ ...request.fields, input })) });
  }
  return batches;
}

function addUsage(total: Usage, more: Usage): Usage {
  return {
    promptTokens: total.promptTokens + more.promptTokens,
    completionTokens: 0,
    totalTokens: total.totalTokens + more.totalTokens,
  };
}
