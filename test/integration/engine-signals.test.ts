import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { parsePrometheusText, sampleValue } from '../telemetry/support/prometheus-text';
import { waitFor, deploymentForSuite } from '../support/test-server';

interface EngineLoad {
  replicaId: string;
  engineRunning: number | null;
  engineWaiting: number | null;
  kvCacheUsage: number | null;
  prefixCacheHitRate: number | null;
}

/**
 * What an engine reports of itself (Heartbeat.engine_signals) reaches replicaLoad and /metrics:
 * real agents (the CPU engine, which counts its running calls), real gRPC, real PostgreSQL.
 */
describe('engine signals in load reports and /metrics', () => {
  const served = deploymentForSuite({ controlPlane: { heartbeatIntervalMs: 200, localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });

  it('carries the engine\'s running requests, KV use and hit rate per replica, and drops the series when the replica goes', async () => {
    const [replicaId] = served.test.server.controlPlane.dispatcher.connections(served.deployment.id).map((connection) => connection.replicaId);
    const ws = createClient({ url: `${served.test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${served.workspace.apiKey}` } });
    const loads: EngineLoad[] = [];
    const subscription = ws.iterate<{ replicaLoad: EngineLoad }>({
      query: 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { replicaId engineRunning engineWaiting kvCacheUsage prefixCacheHitRate } }',
      variables: { id: served.deployment.id },
    });
    const collecting = (async () => {
      for await (const event of subscription) loads.push(event.data!.replicaLoad);
    })().catch(() => {});
    const scrape = async () => parsePrometheusText(await (await fetch(`${served.test.url}/metrics`)).text());
    const labels = { deployment: served.deployment.id, replica: replicaId };
    const controller = new AbortController();
    try {
      await waitFor(() => loads.length > 0, 5_000, 'a load report');
      expect(loads[0]).toEqual({ replicaId, engineRunning: 0, engineWaiting: 0, kvCacheUsage: 0, prefixCacheHitRate: 0 });

      // A slow stream keeps one call running in the engine.
      const streaming = fetch(`${served.deployment.baseUrl}/chat/completions`, {
        method: 'POST', signal: controller.signal,
        headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'slowly' }], stream: true, max_tokens: 200, cpu_engine: { tokens_per_second: 20 } }),
      }).then((response) => response.text()).catch(() => '');
      await waitFor(() => loads.some((load) => load.engineRunning === 1), 5_000, 'a report of one running engine call');
      await waitFor(async () => sampleValue(await scrape(), 'inference_replica_engine_requests_running', labels) === 1, 5_000, 'the running gauge at 1');
      const samples = await scrape();
      expect(sampleValue(samples, 'inference_replica_engine_requests_waiting', labels)).toBe(0);
      expect(sampleValue(samples, 'inference_replica_kv_cache_usage_ratio', labels)).toBe(0);
      expect(sampleValue(samples, 'inference_replica_prefix_cache_hit_ratio', labels)).toBe(0);
      controller.abort();
      await streaming;
      await waitFor(async () => sampleValue(await scrape(), 'inference_replica_engine_requests_running', labels) === 0, 5_000, 'the running gauge back at 0');

      await served.test.server.controlPlane.deployments.pause(served.workspace.workspaceId, served.deployment.id);
      await waitFor(async () => {
        const after = await scrape();
        return after.every((sample) => sample.labels.replica !== replicaId);
      }, 10_000, 'the paused replica\'s series gone');
    } finally {
      controller.abort();
      await subscription.return?.();
      await ws.dispose();
      await collecting;
    }
  });
});
