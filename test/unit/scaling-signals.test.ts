import type { DataSource } from 'typeorm';
import pino from 'pino';
import type { ControlFrame } from '../../proto/worker/v1';
import { AgentConnection } from '../../control-plane/dispatch/agent-connection';
import { Dispatcher } from '../../control-plane/dispatch/dispatcher';
import { ServerRegistry, type DeploymentLoad, type DeploymentTraffic, type ServerLoad } from '../../control-plane/cluster/server-registry';
import { ServerScalingSignals } from '../../control-plane/autoscaling/server-scaling-signals';
import { ClusterScalingSignals, type ServerLoadRow } from '../../control-plane/autoscaling/cluster-scaling-signals';
import { serviceModelOf, SERVICE_DEFAULTS } from '../../control-plane/autoscaling/catalog-service-model';
import { Catalog, type CatalogModel } from '../../control-plane/catalog/catalog';
import { bucketUpperMs, latencyBucket } from '../../control-plane/metrics-history/latency-buckets';
import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';

const T0 = 1_800_000_000_000;
const SLO = { sloTtftP95Ms: 500, sloTpotP95Ms: null, sloQueueWaitP95Ms: null };
const noRows = { find: async () => null };

function finished(overrides: Partial<FinishedRequest> = {}): FinishedRequest {
  return {
    workspaceId: 'ws_1', apiKeyId: 'key_1', deploymentId: 'dep_a', sharedModel: null, model: 'm', endpoint: 'chat.completions', stream: true,
    batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null, promptTokens: 100, completionTokens: 20, cachedTokens: 0,
    startedAt: T0, latencyMs: 900, ttftMs: 120, replicaId: 'rep_1', requestId: 'req_1', traceId: null, phases: null, ...overrides,
  };
}

function traffic(overrides: Partial<DeploymentTraffic> = {}): DeploymentTraffic {
  return { arrivals: 0, lastArrivalAt: null, latencyBuckets: [], requests: 0, promptTokens: 0, completionTokens: 0, ...overrides };
}

function load(overrides: Partial<DeploymentLoad> = {}): DeploymentLoad {
  return { ready: 1, freeSlots: 0, inFlight: 0, queued: 0, guestReady: 0, guestSlots: 0, ...overrides };
}

describe('a server\'s scaling signals', () => {
  let now = T0;
  const signals = new ServerScalingSignals(noRows, () => now);

  it('counts owner arrivals and the last one\'s time, and learns the deployment\'s SLO from the row that arrived', () => {
    signals.arrived({ id: 'dep_a', ...SLO });
    now += 1_500;
    signals.arrived({ id: 'dep_a', ...SLO });
    const snapshot = signals.snapshot();
    expect(snapshot.dep_a).toMatchObject({ arrivals: 2, lastArrivalAt: T0 + 1_500 });
    expect(signals.sloOf('dep_a')).toEqual({ ttftP95Ms: 500, tpotP95Ms: null, queueWaitP95Ms: null });
  });

  it('keeps the last minute\'s TTFT of streamed owner requests and their tokens; guests and batch lines are not the deployment\'s traffic', () => {
    signals.requestFinished(finished({ ttftMs: 120 }));
    signals.requestFinished(finished({ ttftMs: 480 }));
    signals.requestFinished(finished({ ttftMs: null, stream: false, promptTokens: 40, completionTokens: 10 }));
    signals.requestFinished(finished({ sharedModel: 'shared/m', ttftMs: 9_000 }));
    signals.requestFinished(finished({ batchId: 'batch_1', ttftMs: 9_000 }));
    const snapshot = signals.snapshot().dep_a;
    expect(snapshot.latencyBuckets).toEqual([[latencyBucket(120), 1], [latencyBucket(480), 1]]);
    expect([snapshot.requests, snapshot.promptTokens, snapshot.completionTokens]).toEqual([3, 240, 50]);
    // A minute and a slot later none of it is recent any more; the counter stays.
    now += 71_000;
    expect(signals.snapshot().dep_a).toMatchObject({ arrivals: 2, latencyBuckets: [], requests: 0 });
  });

  it('counts a media job\'s queue wait where it starts', () => {
    signals.mediaStarted('dep_media', 2_000);
    expect(signals.snapshot().dep_media).toMatchObject({ arrivals: 0, lastArrivalAt: null, latencyBuckets: [[latencyBucket(2_000), 1]] });
  });

  it('reads the SLO of a deployment it has not seen once, and answers from then on', async () => {
    const rows = { find: jest.fn(async (id: string) => ({ id, sloTtftP95Ms: null, sloTpotP95Ms: null, sloQueueWaitP95Ms: 30_000 }) as never) };
    const fresh = new ServerScalingSignals(rows, () => now);
    expect(fresh.sloOf('dep_media')).toBeNull();
    expect(fresh.sloOf('dep_media')).toBeNull();
    await new Promise((resolve) => setImmediate(resolve));
    expect(fresh.sloOf('dep_media')).toEqual({ ttftP95Ms: null, tpotP95Ms: null, queueWaitP95Ms: 30_000 });
    expect(rows.find).toHaveBeenCalledTimes(1);
  });
});

describe('the cluster\'s scaling signals', () => {
  /** Two servers' rows as the leader reads them, changed between observations. */
  const rows: Record<string, ServerLoad> = { a: {}, b: {} };
  const loads = (): ServerLoadRow[] => Object.entries(rows).map(([serverId, serverLoad]) => ({ serverId, load: serverLoad }));

  it('sums arrival rates per server counter over the window, and restarts a counter that went back', () => {
    const cluster = new ClusterScalingSignals(loads, { rateWindowMs: 10_000 });
    rows.a = { dep: load({ traffic: traffic({ arrivals: 100 }) }) };
    rows.b = { dep: load({ ready: 0, traffic: traffic({ arrivals: 40 }) }) };
    expect(cluster.observe('dep', T0).arrivalsPerSecond).toBeUndefined();
    rows.a = { dep: load({ traffic: traffic({ arrivals: 150 }) }) }; // 50 in 5 s: 10/s
    rows.b = { dep: load({ ready: 0, traffic: traffic({ arrivals: 65 }) }) }; // 25 in 5 s: 5/s
    expect(cluster.observe('dep', T0 + 5_000).arrivalsPerSecond).toBeCloseTo(15);
    rows.a = { dep: load({ traffic: traffic({ arrivals: 250 }) }) };
    rows.b = { dep: load({ ready: 0, traffic: traffic({ arrivals: 5 }) }) }; // b restarted: its window starts again
    // a: 150 over the 10 s window since its first sample; b: no rate yet.
    expect(cluster.observe('dep', T0 + 10_000).arrivalsPerSecond).toBeCloseTo(15);
    rows.b = { dep: load({ ready: 0, traffic: traffic({ arrivals: 15 }) }) };
    rows.a = { dep: load({ traffic: traffic({ arrivals: 290 }) }) };
    // a: the window keeps its newest sample at least 10 s old (T0 + 5 s, 150): 140 in 10 s; b: 10 in 5 s.
    expect(cluster.observe('dep', T0 + 15_000).arrivalsPerSecond).toBeCloseTo(14 + 2);
  });

  it('is idle since the last arrival on any server, and without one since it first looked', () => {
    const cluster = new ClusterScalingSignals(loads);
    rows.a = { dep: load({ traffic: traffic({ arrivals: 1, lastArrivalAt: T0 - 30_000 }) }) };
    rows.b = { dep: load({ traffic: traffic({ arrivals: 1, lastArrivalAt: T0 - 10_000 }) }) };
    expect(cluster.observe('dep', T0).idleMs).toBe(10_000);
    // Server b is gone: the leader remembers the last arrival it saw.
    rows.b = {};
    expect(cluster.observe('dep', T0 + 5_000).idleMs).toBe(15_000);
    expect(cluster.observe('other', T0 + 5_000).idleMs).toBe(0);
    expect(cluster.observe('other', T0 + 65_000).idleMs).toBe(60_000);
  });

  it('takes the p95 of every server\'s requests together, the highest KV use, the waiting requests and the mean prefix hit rate', () => {
    const cluster = new ClusterScalingSignals(loads);
    // 90 fast requests on a, 10 slow ones on b: the p95 is among b's, though a's alone would say fast.
    rows.a = { dep: load({ kvCacheUsage: 0.4, prefixCacheHitRate: 0.5, prefixCacheReporting: 2, waiting: 3, traffic: traffic({ latencyBuckets: [[latencyBucket(100), 90]], requests: 30, promptTokens: 3_000, completionTokens: 600 }) }) };
    rows.b = { dep: load({ kvCacheUsage: 0.9, prefixCacheHitRate: 0.2, prefixCacheReporting: 1, waiting: 2, traffic: traffic({ latencyBuckets: [[latencyBucket(4_000), 10]], requests: 10, promptTokens: 1_000, completionTokens: 200 }) }) };
    const seen = cluster.observe('dep', T0);
    expect(seen.observedP95Ms).toBeGreaterThan(bucketUpperMs(latencyBucket(4_000) - 1));
    expect(seen.observedP95Ms).toBeLessThanOrEqual(bucketUpperMs(latencyBucket(4_000)));
    expect(seen).toMatchObject({ kvCacheUsage: 0.9, waitingForReplica: 5, meanPromptTokens: 100, meanOutputTokens: 20 });
    expect(seen.prefixCacheHitRate).toBeCloseTo(0.4);
    rows.a = { dep: load() };
    rows.b = {};
    expect(cluster.observe('dep', T0 + 1_000)).toMatchObject({ kvCacheUsage: null, observedP95Ms: null, waitingForReplica: 0, prefixCacheHitRate: null, meanPromptTokens: null });
  });
});

describe('the registry publishes a server\'s traffic and engine signals', () => {
  const stream = { write: (_frame: ControlFrame) => true } as unknown as ConstructorParameters<typeof AgentConnection>[0];

  it('per deployment, with or without a replica here, and the highest KV use of its replicas', () => {
    const dispatcher = new Dispatcher();
    const connection = new AgentConnection(stream, 'agt_1', 'rep_1', 'dep_served', 8, dispatcher, 'ws', true, 'vllm', true, false, 0, 0);
    connection.ready = true;
    dispatcher.register(connection);
    connection.heartbeat = { engineSignals: { running: 2, waiting: 0, kvCacheUsage: 0.75, prefixCacheHitRate: 0.5, prefixCacheHitRateKnown: true } } as never;
    let now = T0;
    const signals = new ServerScalingSignals(noRows, () => now);
    signals.arrived({ id: 'dep_served', ...SLO });
    signals.arrived({ id: 'dep_cold', ...SLO });
    now += 10;
    const registry = new ServerRegistry({} as DataSource, 'srv_test', '127.0.0.1:0', dispatcher, { heartbeatIntervalMs: 1_000, serverTimeoutMs: 5_000 },
      pino({ level: 'silent' }), () => 0, () => signals.snapshot());
    const snapshot = registry.loadSnapshot();
    expect(snapshot.dep_served).toMatchObject({ ready: 1, kvCacheUsage: 0.75, prefixCacheHitRate: 0.5, prefixCacheReporting: 1, traffic: { arrivals: 1, lastArrivalAt: T0 } });
    expect(snapshot.dep_cold).toMatchObject({ ready: 0, freeSlots: 0, inFlight: 0, traffic: { arrivals: 1 } });
    expect(snapshot.dep_cold.kvCacheUsage).toBeUndefined();
  });
});

describe('the service model of a catalog model', () => {
  const catalog = Catalog.load();
  const chat = catalog.defaultChatModel();
  const image = catalog.models.find((model) => model.modality === 'image')!;

  it('uses the catalog\'s stated figures, the deployment\'s measured request sizes and the engines\' prefix hits over the defaults', () => {
    const stated: CatalogModel = { ...chat, service: { slots: 12, prefillTokensPerSecond: 8_000, decodeTokensPerSecond: 40, meanPromptTokens: 1_000, meanOutputTokens: 300, startupSeconds: 90 } };
    expect(serviceModelOf(stated)).toEqual({
      slots: 12, prefillTokensPerSecond: 8_000, decodeTokensPerSecond: 40, prefixHitRate: 0, meanPromptTokens: 1_000, meanOutputTokens: 300, startupMs: 90_000,
    });
    expect(serviceModelOf(stated, { prefixCacheHitRate: 0.3, meanPromptTokens: 200, meanOutputTokens: 50 })).toMatchObject({ prefixHitRate: 0.3, meanPromptTokens: 200, meanOutputTokens: 50 });
    expect(serviceModelOf(chat)).toEqual({
      slots: chat.targetConcurrency, prefillTokensPerSecond: SERVICE_DEFAULTS.prefillTokensPerSecond, decodeTokensPerSecond: SERVICE_DEFAULTS.decodeTokensPerSecond,
      prefixHitRate: 0, meanPromptTokens: 512, meanOutputTokens: 256, startupMs: 60_000,
    });
  });

  it('gives a media job its seconds as one slot-holding step', () => {
    const model = serviceModelOf({ ...image, jobSeconds: 8 });
    const serviceSeconds = model.meanPromptTokens / model.prefillTokensPerSecond + model.meanOutputTokens / model.decodeTokensPerSecond;
    expect(serviceSeconds).toBeCloseTo(8);
    expect(model.slots).toBe(image.targetConcurrency);
  });
});
