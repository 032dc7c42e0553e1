import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';
import { latencyBucket } from '../../control-plane/metrics-history/latency-buckets';
import { MinuteRollups } from '../../control-plane/metrics-history/minute-rollups';

const MINUTE = 60_000;
const T0 = 1_800_000_000_000 - (1_800_000_000_000 % MINUTE);

function finished(overrides: Partial<FinishedRequest> = {}): FinishedRequest {
  return {
    workspaceId: 'ws_1', apiKeyId: 'key_1', deploymentId: 'dep_a', sharedModel: null, model: 'm', endpoint: 'chat.completions', stream: true,
    batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null, promptTokens: 10, completionTokens: 5, cachedTokens: 0,
    startedAt: T0 + 1_000, latencyMs: 200, ttftMs: 40, replicaId: 'rep_1', requestId: 'req_1', traceId: null, phases: null, ...overrides,
  };
}

describe('MinuteRollups', () => {
  it('counts per deployment and the minute a request ended in', () => {
    const rollups = new MinuteRollups();
    rollups.requestFinished(finished());
    rollups.requestFinished(finished({ outcome: 'failed', errorCode: 'engine_error', ttftMs: null, promptTokens: 3, completionTokens: 0 }));
    rollups.requestFinished(finished({ deploymentId: 'dep_b' }));
    rollups.requestFinished(finished({ startedAt: T0 + 59_900, latencyMs: 200 })); // ends in the next minute
    const taken = rollups.take();
    const a0 = taken.find((entry) => entry.deploymentId === 'dep_a' && entry.minute === T0 / MINUTE)!;
    expect([a0.requests, a0.errors, a0.tokensIn, a0.tokensOut]).toEqual([2, 1, 13, 5]);
    expect(a0.latency[latencyBucket(200)]).toBe(2);
    expect(a0.ttft[latencyBucket(40)]).toBe(1);
    expect(taken.find((entry) => entry.deploymentId === 'dep_a' && entry.minute === T0 / MINUTE + 1)?.requests).toBe(1);
    expect(taken.find((entry) => entry.deploymentId === 'dep_b')?.requests).toBe(1);
    expect(rollups.take()).toEqual([]);
  });

  it('keeps batch lines out of the latency and TTFT of live traffic, but counts their requests and tokens', () => {
    const rollups = new MinuteRollups();
    rollups.requestFinished(finished({ batchId: 'batch_1', latencyMs: 90_000 }));
    const [entry] = rollups.take();
    expect(entry.requests).toBe(1);
    expect(entry.tokensOut).toBe(5);
    expect(entry.latency.reduce((sum, count) => sum + count, 0)).toBe(0);
  });

  it('adds GPU charges to the minute they were billed, and puts back a failed write\'s counts onto newer ones', () => {
    const rollups = new MinuteRollups();
    rollups.charged([{ deploymentId: 'dep_a', amount: 0.25 }, { deploymentId: 'dep_b', amount: 0 }], T0 + 5_000);
    rollups.requestFinished(finished());
    const failed = rollups.take();
    rollups.requestFinished(finished());
    rollups.putBack(failed);
    const [entry] = rollups.take();
    expect(entry.requests).toBe(2);
    expect(entry.gpuCostUsd).toBeCloseTo(0.25);
    expect(entry.latency[latencyBucket(200)]).toBe(2);
  });

  it('judges streamed owner requests by the TTFT target and media jobs by the queue-wait target, and counts arrivals in their minute', () => {
    const slos: Record<string, { ttftP95Ms: number | null; tpotP95Ms: null; queueWaitP95Ms: number | null }> = {
      dep_a: { ttftP95Ms: 100, tpotP95Ms: null, queueWaitP95Ms: null },
      dep_media: { ttftP95Ms: null, tpotP95Ms: null, queueWaitP95Ms: 5_000 },
    };
    const rollups = new MinuteRollups((deploymentId) => slos[deploymentId] ?? null);
    rollups.requestFinished(finished({ ttftMs: 40 }));
    rollups.requestFinished(finished({ ttftMs: 100 })); // at the target: within
    rollups.requestFinished(finished({ ttftMs: 101 }));
    rollups.requestFinished(finished({ ttftMs: null, stream: false })); // no first token measured: not judged
    rollups.requestFinished(finished({ sharedModel: 'shared/m', ttftMs: 500 })); // a guest: the owner's SLO is not its promise
    rollups.requestFinished(finished({ batchId: 'batch_1', ttftMs: 500 }));
    rollups.requestFinished(finished({ deploymentId: 'dep_b', ttftMs: 500 })); // no SLO stated
    rollups.mediaStarted('dep_media', 4_000, T0 + 1_000);
    rollups.mediaStarted('dep_media', 6_000, T0 + 2_000);
    rollups.mediaStarted('dep_b', 6_000, T0 + 2_000);
    rollups.arrived('dep_a', T0 + 500);
    rollups.arrived('dep_a', T0 + MINUTE + 500);
    const taken = rollups.take();
    const at = (deploymentId: string, minute = T0 / MINUTE) => taken.find((entry) => entry.deploymentId === deploymentId && entry.minute === minute);
    expect([at('dep_a')!.sloRequests, at('dep_a')!.withinSlo, at('dep_a')!.arrivals]).toEqual([3, 2, 1]);
    expect(at('dep_a', T0 / MINUTE + 1)!.arrivals).toBe(1);
    expect([at('dep_media')!.sloRequests, at('dep_media')!.withinSlo]).toEqual([2, 1]);
    expect(at('dep_b')!.sloRequests).toBe(0);
    // A failed write's counts go back with the new ones.
    rollups.putBack(taken);
    rollups.arrived('dep_a', T0 + 700);
    const again = rollups.take().find((entry) => entry.deploymentId === 'dep_a' && entry.minute === T0 / MINUTE)!;
    expect([again.sloRequests, again.withinSlo, again.arrivals]).toEqual([3, 2, 2]);
  });
});
