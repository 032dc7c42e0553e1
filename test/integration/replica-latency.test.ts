import { createClient } from 'graphql-ws';
import OpenAI from 'openai';
import WebSocket from 'ws';
import { LatencyWindow } from '../../control-plane/dispatch/latency-window';
import { waitFor, deploymentForSuite } from '../support/test-server';

describe('latency window', () => {
  it('reports the means of the interval it closes, then starts afresh', () => {
    const window = new LatencyWindow();
    expect(window.take()).toEqual({ firstOutputMs: null, completionMs: null, completed: 0 });
    window.firstOutput(10);
    window.firstOutput(21);
    window.completed(100);
    expect(window.take()).toEqual({ firstOutputMs: 15.5, completionMs: 100, completed: 1 });
    expect(window.take()).toEqual({ firstOutputMs: null, completionMs: null, completed: 0 });
  });
});

/** replicaLoad carries what the replica's jobs took since its previous report: the console's latency over time. */
describe('replica latency in load reports', () => {
  const served = deploymentForSuite({ controlPlane: { heartbeatIntervalMs: 200 } });

  it('a report after requests has their mean time to first output and to completion; a quiet one has none', async () => {
    const ws = createClient({ url: `${served.test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${served.workspace.apiKey}` } });
    const loads: Array<{ firstOutputMs: number | null; completionMs: number | null; completed: number }> = [];
    const subscription = ws.iterate<{ replicaLoad: (typeof loads)[number] }>({
      query: 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { firstOutputMs completionMs completed } }', variables: { id: served.deployment.id },
    });
    const collecting = (async () => {
      for await (const event of subscription) loads.push(event.data!.replicaLoad);
    })().catch(() => {});
    try {
      await waitFor(() => loads.some((load) => load.completed === 0), 5_000, 'a quiet report');
      expect(loads.find((load) => load.completed === 0)).toEqual({ firstOutputMs: null, completionMs: null, completed: 0 });
      const client = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: served.workspace.apiKey });
      const startedAt = performance.now();
      await Promise.all([1, 2, 3].map(() => client.chat.completions.create({ model: 'meta-llama/Llama-3.1-8B-Instruct', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 })));
      const elapsed = performance.now() - startedAt;
      await waitFor(() => loads.reduce((sum, load) => sum + load.completed, 0) >= 3, 5_000, 'reports of 3 completed jobs');
      const busy = loads.filter((load) => load.completed > 0);
      for (const load of busy) {
        expect(load.firstOutputMs).toBeGreaterThan(0);
        expect(load.completionMs).toBeGreaterThanOrEqual(load.firstOutputMs!);
        expect(load.completionMs).toBeLessThan(elapsed);
      }
    } finally {
      await subscription.return?.();
      await ws.dispose();
      await collecting;
    }
  });
});
