import type { FinishedRequest } from '../control-plane/pipeline/finished-request';

/**
 * FinishedRequests as a server's WorkTicket settles them, for the benches of what hears them
 * (run-rollups.ts, request-observers.ts): 20 deployments, 40 % streams, log-normal latencies
 * around 300 ms and TTFT around 60 ms, 2 % failures, 3 % batch lines. Times are what the
 * pipeline's clock (Date.now) gives: whole milliseconds, with each request's phases. Each call
 * makes a new object, as settlement does, so what an observer keeps alive costs the garbage
 * collector what it costs a server.
 */
export class FinishedRequests {
  private index = 0;
  private readonly deploymentIds: string[];
  private readonly latencies = Float64Array.from({ length: 4_096 }, () => Math.round(Math.exp(Math.log(300) + 0.8 * gaussian())));
  private readonly ttfts = Float64Array.from({ length: 4_096 }, () => Math.round(Math.exp(Math.log(60) + 0.6 * gaussian())));

  constructor(private readonly workspaceId: string, deployments = 20) {
    this.deploymentIds = Array.from({ length: deployments }, (_, index) => `dep_bench_${index}`);
  }

  next(now: number): FinishedRequest {
    const index = this.index++;
    const slot = index & 4_095;
    const stream = index % 5 < 2;
    const failed = index % 50 === 7;
    const latencyMs = this.latencies[slot];
    const ttftMs = stream ? Math.min(this.ttfts[slot], latencyMs) : null;
    return {
      workspaceId: this.workspaceId, apiKeyId: 'key_bench', deploymentId: this.deploymentIds[index % this.deploymentIds.length], sharedModel: null,
      model: 'meta-llama/Llama-3.1-8B-Instruct', endpoint: 'chat.completions', stream, batchId: index % 33 === 5 ? 'batch_bench' : undefined,
      outcome: failed ? 'failed' : 'succeeded', finishReason: failed ? null : 'stop', errorCode: failed ? 'engine_error' : null,
      promptTokens: 200 + (index % 300), completionTokens: 50 + (index % 200), cachedTokens: index % 3 === 0 ? 128 : 0,
      startedAt: now - latencyMs, latencyMs, ttftMs, replicaId: 'rep_bench', requestId: `req_bench_${index.toString(36)}`, traceId: null,
      phases: { admittedMs: 0, dispatchedMs: 1, startedMs: 2, ...(ttftMs !== null ? { firstTokenMs: ttftMs } : {}), endedMs: latencyMs },
    };
  }
}

function gaussian(): number {
  return Math.sqrt(-2 * Math.log(1 - Math.random())) * Math.cos(2 * Math.PI * Math.random());
}
