import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthenticatedKey } from '../../control-plane/api-keys/api-key.service';
import type { JobListener } from '../../control-plane/dispatch/job';
import type { ControlPlane } from '../../control-plane/main';
import { SHARED_MODEL_PREFIX } from '../../control-plane/sharing/shared-serving';
import type { Usage } from '../../proto/worker/v1';
import { readBody } from '../http/read-body';
import type { RequestTrace } from '../http/request-id';
import { rateLimitHeaders } from './rate-limit-headers';
import type { TextRouteOptions } from './text-completion.route';
import type { JobOutcome } from './text-job-response';
import { runTextJob, type StreamLimits } from './text-job-run';
import { parseTextRequest } from './text-request';
import { textTokenHold } from '../../control-plane/pipeline/admission';

/** The metrics and log label of a guest request before its model is known. */
export const SHARED_MODEL_LABEL = 'shared';

/**
 * `POST /shared/v1/chat/completions` with `model: "shared/<model-id>"` and the guest's own
 * key: the same body, SSE, pass-through fields and rate-limit headers as a deployment's
 * endpoint, on a replica of any owner who shares that model, billed per token.
 */
export class SharedChatRoute {
  constructor(private readonly controlPlane: ControlPlane, private readonly options: TextRouteOptions & StreamLimits) {}

  /** Answers on the raw response; `labelled` learns the shared model once it is known (the metrics and log label). */
  async handle(request: IncomingMessage, response: ServerResponse, key: AuthenticatedKey, trace: RequestTrace, labelled: (label: string) => void): Promise<void> {
    const startedAt = Date.now();
    const { shared, rateLimiter, usage: usageRecorder } = this.controlPlane;
    const body = await readBody(request, this.options.maxBodyBytes);
    const textRequest = parseTextRequest(body, 'chat.completions');
    const model = shared.resolve(textRequest.model);
    const label = `${SHARED_MODEL_PREFIX}${model.modelId}`;
    labelled(label);
    const decision = await rateLimiter.admit(key, textTokenHold(body.length, textRequest.fields));
    const headers = rateLimitHeaders(decision, key.rpmLimit, key.tpdLimit);
    headers.push('x-request-id', trace.id);
    let admission;
    try {
      admission = await shared.admit(key, model, textRequest.fields, body);
    } catch (error) {
      rateLimiter.settle(decision.hold, 0);
      throw error;
    }

    let metered: (outcome: { result: JobOutcome; usage: Usage | undefined }) => void = () => {};
    const outcome = new Promise<{ result: JobOutcome; usage: Usage | undefined }>((resolve) => (metered = resolve));
    const meter = (result: JobOutcome, usage: Usage | undefined) => {
      const total = usage?.totalTokens ?? 0;
      rateLimiter.settle(decision.hold, total);
      // The guest's own record (TPD, the guest's usage): the shared model, never the owner's deployment or replica.
      usageRecorder.record({
        workspaceId: key.workspaceId, apiKeyId: key.id, deploymentId: label, replicaId: null,
        endpoint: 'chat.completions', status: result, stream: textRequest.stream, promptTokens: usage?.promptTokens ?? 0,
        completionTokens: usage?.completionTokens ?? 0, totalTokens: total, latencyMs: Date.now() - startedAt, createdAt: new Date(startedAt),
      });
      if (usage) this.controlPlane.metrics.recordTokens(label, usage.promptTokens, usage.completionTokens);
      metered({ result, usage });
    };
    let dispatched = false;
    const dispatch = (listener: JobListener) => {
      const job = shared.dispatch(admission, {
        kind: 'JOB_KIND_CHAT_COMPLETION', stream: textRequest.stream, includeUsage: textRequest.includeUsage,
        deadlineUnixMs: startedAt + this.options.requestTimeoutMs, streamWindowBytes: textRequest.stream ? this.options.streamBufferBytes : 0,
      }, listener);
      dispatched = true;
      return job;
    };
    let firstTokenMs: number | null = null;
    try {
      const jobResponse = await runTextJob(response, {
        stream: textRequest.stream, headers, requestTimeoutMs: this.options.requestTimeoutMs, limits: this.options, dispatch, meter,
      });
      if (jobResponse.firstByteAt) firstTokenMs = jobResponse.firstByteAt - trace.receivedAt;
    } finally {
      // Settled once the job's terminal event (with its usage) is in: after a client left, that comes later.
      if (!dispatched) {
        rateLimiter.settle(decision.hold, 0);
        await shared.finish(admission, 'failed', undefined, null);
      } else {
        void outcome.then(({ result, usage }) => shared.finish(admission, result, usage, firstTokenMs));
      }
    }
  }
}
