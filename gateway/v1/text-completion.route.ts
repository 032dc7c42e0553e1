import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { Deployment } from '../../control-plane/deployments/deployment.entity';
import { AppError } from '../../control-plane/errors/app-error';
import type { ControlPlane } from '../../control-plane/main';
import type { Usage } from '../../proto/worker/v1';
import { readBody } from '../http/read-body';
import type { RequestTrace } from '../http/request-id';
import { rateLimitHeaders } from './rate-limit-headers';
import type { Job, JobListener } from '../../control-plane/dispatch/job';
import { RESTARTING_FOR_SHARING } from '../../control-plane/sharing/sharing-rollout';
import type { JobOutcome } from './text-job-response';
import { servedEndpoints } from './endpoint-table';
import { runTextJob, type StreamLimits } from './text-job-run';
import { parseTextRequest, type TextEndpoint } from './text-request';
import { shortened } from '../../control-plane/errors/quote-value';
import { refuseWithoutCredit, textTokenHold } from '../../control-plane/pipeline/admission';

export interface TextRouteOptions {
  maxBodyBytes: number;
  requestTimeoutMs: number;
}

/**
 * `POST /v1/chat/completions` and `POST /v1/completions` on a deployment endpoint:
 * validate → model check → paused check → rate limit → dispatch → relay → meter.
 */
export class TextCompletionRoute {
  constructor(private readonly controlPlane: ControlPlane, private readonly options: TextRouteOptions & StreamLimits) {}

  /**
   * Answers on the raw response (the gateway's fast lane calls this without Koa); an error
   * thrown before the first byte is the caller's to render.
   */
  async handle(request: IncomingMessage, response: ServerResponse, deployment: Deployment, key: AuthenticatedKey, endpoint: TextEndpoint, trace: RequestTrace): Promise<void> {
    const startedAt = Date.now();
    const body = await readBody(request, this.options.maxBodyBytes);
    const textRequest = parseTextRequest(body, endpoint);
    this.checkModel(deployment, textRequest.model, endpoint);
    refuseWithoutCredit(key);
    if (deployment.status === 'Paused') {
      throw new AppError('deployment_paused', 'this deployment is paused; resume it to serve requests', { retryAfterSeconds: 60 });
    }
    const decision = await this.controlPlane.rateLimiter.admit(key, textTokenHold(body.length, textRequest.fields));
    const headers = rateLimitHeaders(decision, key.rpmLimit, key.tpdLimit);
    headers.push('x-request-id', trace.id);

    const meter = (outcome: JobOutcome, usage: Usage | undefined, job: Job) => {
      const total = usage?.totalTokens ?? 0;
      this.controlPlane.rateLimiter.settle(decision.hold, total);
      this.controlPlane.usage.record({
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: deployment.id, replicaId: job.replicaId,
        endpoint, status: outcome, stream: textRequest.stream, promptTokens: usage?.promptTokens ?? 0,
        completionTokens: usage?.completionTokens ?? 0, totalTokens: total, latencyMs: Date.now() - startedAt, createdAt: new Date(startedAt),
      });
      if (usage) this.controlPlane.metrics.recordTokens(deployment.id, usage.promptTokens, usage.completionTokens);
    };
    let dispatched = false;
    const dispatch = (listener: JobListener) => {
      try {
        const job = this.controlPlane.jobs.dispatch({
          deploymentId: deployment.id,
          kind: endpoint === 'chat.completions' ? 'JOB_KIND_CHAT_COMPLETION' : 'JOB_KIND_COMPLETION',
          body, stream: textRequest.stream, includeUsage: textRequest.includeUsage, model: deployment.modelId,
          deadlineUnixMs: startedAt + this.options.requestTimeoutMs, streamWindowBytes: textRequest.stream ? this.options.streamBufferBytes : 0,
        }, listener);
        dispatched = true;
        return job;
      } catch (error) {
        throw restartingForSharing(deployment, error);
      }
    };
    let jobResponse;
    try {
      jobResponse = await runTextJob(response, {
        stream: textRequest.stream, headers, requestTimeoutMs: this.options.requestTimeoutMs, limits: this.options, dispatch, meter,
      });
    } finally {
      // A job never dispatched has no terminal event to meter it: its hold goes back whole.
      if (!dispatched) this.controlPlane.rateLimiter.settle(decision.hold, 0);
    }
    if (jobResponse.firstByteAt) this.controlPlane.metrics.recordTimeToFirstToken(endpoint, (jobResponse.firstByteAt - trace.receivedAt) / 1000);
  }

  private checkModel(deployment: Deployment, model: string | undefined, endpoint: TextEndpoint): void {
    if (model !== undefined && model !== deployment.modelId) {
      throw new AppError('model_mismatch', `model '${shortened(model)}' is not served here; this endpoint serves '${deployment.modelId}' (the field may be omitted)`, { param: 'model' });
    }
    const entry = this.controlPlane.catalog.find(deployment.modelId);
    if (entry && entry.modality !== 'text') {
      throw new AppError('wrong_modality', `'${deployment.modelId}' is an ${entry.modality} model; use the ${entry.modality} endpoints`, { param: 'model' });
    }
    if (entry && entry.task === 'embedding') {
      throw new AppError('unsupported_endpoint', `'${deployment.modelId}' is an embedding model; this deployment serves ${servedEndpoints(entry)} (and GET /v1/models)`);
    }
    if (entry && endpoint === 'chat.completions' && entry.task === 'completion') {
      throw new AppError('unsupported_endpoint', `'${deployment.modelId}' is a base model without a chat template; use POST /v1/completions`, { param: 'messages' });
    }
  }
}

/** With no replica ready while the rolling restart for sharing runs, the 503 says so. */
function restartingForSharing(deployment: Deployment, error: unknown): unknown {
  if (!(error instanceof AppError) || error.code !== 'no_replica_available' || deployment.sharing !== 'activating') return error;
  return new AppError('no_replica_available', `this deployment is ${RESTARTING_FOR_SHARING}; its replicas restart one at a time, retry in a few seconds`,
    { retryAfterSeconds: 5, cause: error });
}
