import OpenAI from 'openai';
import { graphqlClient } from '../capacity/support/graphql-client';
import type { FinishedRequest } from '../../control-plane/pipeline/finished-request';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

const POINT = 'at requests errors tokensIn tokensOut ttftP50 ttftP95 ttftP99 latencyP50 latencyP95 latencyP99 replicas gpuCostUsd';
const METRICS = `query($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!, $step: Int) {
  deploymentMetrics(deploymentId: $id, from: $from, to: $to, stepMinutes: $step) { ${POINT} } }`;
const MINUTE = 60_000;

/**
 * Per-minute deployment history from two real servers on one database (B runs no agents: its
 * requests are relayed to A's replica), read over GraphQL: each server writes what it counted
 * and the rows merge, percentiles included.
 */
describe('metrics history across two servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let stranger: TestWorkspace;
  let deployment: { id: string; slug: string; baseUrl: string };
  let graphql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    // Writes only when the test flushes; GPU time at $3.60/h so metering passes charge something.
    const controlPlane = { metricsHistory: { flushIntervalMs: 600_000, sweepIntervalMs: 100 }, localPricePerHour: 3.6, clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 1_000 };
    serverA = await startTestServer({ controlPlane });
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, controlPlane: { ...controlPlane, localAgents: false } });
    workspace = await serverA.createWorkspace();
    stranger = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace, { priceCapPerHour: 10 });
    await serverA.waitForReplicas(deployment.id, 1);
    await waitFor(() => serverB.server.controlPlane.registry.peers().some((peer) => peer.load[deployment.id]?.ready === 1), 10_000, 'B sees A\'s replica');
    graphql = graphqlClient(serverA.url, workspace.apiKey);
  }, 60_000);

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  const flushBoth = async () => {
    await serverA.server.controlPlane.rollupWriter.flush();
    await serverB.server.controlPlane.rollupWriter.flush();
  };
  const query = (sql: string, parameters: unknown[]) => serverA.server.controlPlane.dataSource.query(sql, parameters);

  it('counts requests, tokens, TTFT and latency of real traffic through both servers, with replicas and GPU cost', async () => {
    const from = new Date(Date.now() - MINUTE);
    const clients = [serverA, serverB].map((server) => new OpenAI({ baseURL: `${server.url}/d/${deployment.slug}/v1`, apiKey: workspace.apiKey, maxRetries: 0 }));
    let tokensIn = 0;
    let tokensOut = 0;
    for (let index = 0; index < 10; index++) {
      const client = clients[index % 2];
      const stream = await client.chat.completions.create({
        messages: [{ role: 'user', content: `hello ${index}` }], max_tokens: 3, stream: true, stream_options: { include_usage: true },
      } as any) as any;
      for await (const chunk of stream) {
        if (chunk.usage) {
          tokensIn += chunk.usage.prompt_tokens;
          tokensOut += chunk.usage.completion_tokens;
        }
      }
    }
    await serverA.server.controlPlane.capacity.metering.meterRunning();
    await serverB.server.controlPlane.capacity.metering.meterRunning();
    await flushBoth();
    const to = new Date(Date.now() + MINUTE);
    const result = await graphql(METRICS, { id: deployment.id, from: from.toISOString(), to: to.toISOString(), step: 1 });
    expect(result.errors).toBeUndefined();
    const points = result.data.deploymentMetrics as any[];
    const sum = (field: string) => points.reduce((total, point) => total + point[field], 0);
    expect(sum('requests')).toBe(10);
    expect(sum('errors')).toBe(0);
    expect(sum('tokensIn')).toBe(tokensIn);
    expect(sum('tokensOut')).toBe(tokensOut);
    const busy = points.filter((point) => point.requests > 0);
    expect(busy.every((point) => point.latencyP50 > 0 && point.latencyP99 >= point.latencyP50 && point.ttftP50 > 0)).toBe(true);
    expect(points.some((point) => point.replicas === 1)).toBe(true);
    expect(sum('gpuCostUsd')).toBeGreaterThan(0);
    // Both servers wrote rows; one per minute holds them.
    const rows = await query(`SELECT minute, requests FROM deployment_metrics_minutes WHERE deployment_id = $1 AND requests > 0`, [deployment.id]);
    expect(rows.reduce((total: number, row: { requests: number }) => total + row.requests, 0)).toBe(10);
  });

  it('merges two servers\' counts of one minute into one row, and reads percentiles of their requests together', async () => {
    const minute = Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE;
    const request = (latencyMs: number): FinishedRequest => ({
      workspaceId: workspace.workspaceId, apiKeyId: workspace.apiKeyId, deploymentId: deployment.id, sharedModel: null, model: 'm', endpoint: 'chat.completions',
      stream: true, batchId: undefined, outcome: 'succeeded', finishReason: 'stop', errorCode: null, promptTokens: 1, completionTokens: 1, cachedTokens: 0,
      startedAt: minute + 1_000, latencyMs, ttftMs: latencyMs / 2, replicaId: null, requestId: null, traceId: null, phases: null,
    });
    // Server A saw 90 fast requests, server B 10 slow ones, in the same minute.
    for (let index = 0; index < 90; index++) serverA.server.controlPlane.minuteRollups.requestFinished(request(10));
    for (let index = 0; index < 10; index++) serverB.server.controlPlane.minuteRollups.requestFinished(request(1_000));
    serverB.server.controlPlane.minuteRollups.requestFinished({ ...request(50), outcome: 'failed', errorCode: 'engine_error' });
    await flushBoth();
    const rows = await query('SELECT requests, errors FROM deployment_metrics_minutes WHERE deployment_id = $1 AND minute = $2', [deployment.id, new Date(minute)]);
    expect(rows).toEqual([{ requests: 101, errors: 1 }]);
    const [point] = (await graphql(METRICS, { id: deployment.id, from: new Date(minute).toISOString(), to: new Date(minute + MINUTE).toISOString(), step: 1 })).data.deploymentMetrics;
    expect(point).toMatchObject({ requests: 101, errors: 1 });
    // The p95 of all 101 is a slow one (~1 s): a mean of the servers' own p95s would be ~500 ms.
    expect(point.latencyP95).toBeGreaterThan(840);
    expect(point.latencyP95).toBeLessThan(1_190);
    expect(point.latencyP50).toBeGreaterThan(8.4);
    expect(point.latencyP50).toBeLessThan(11.9);
    expect(point.ttftP95).toBeGreaterThan(420);
    // A wider step sums the minutes around it: the same requests, one point.
    const wide = (await graphql(METRICS, { id: deployment.id, from: new Date(minute - 5 * MINUTE).toISOString(), to: new Date(minute + 5 * MINUTE).toISOString(), step: 10 })).data.deploymentMetrics;
    expect(wide).toHaveLength(1);
    expect(wide[0].requests).toBe(101);
  });

  it('answers NOT_FOUND for another workspace\'s deployment as for a missing one, and BAD_USER_INPUT naming the field for a bad range', async () => {
    const range = { from: new Date(Date.now() - 3_600_000).toISOString(), to: new Date().toISOString() };
    const foreign = await graphql(METRICS, { id: deployment.id, ...range, step: 1 }, stranger.apiKey);
    expect(foreign.errors?.[0].extensions.code).toBe('NOT_FOUND');
    expect(foreign.data).toBeNull();
    expect((await graphql(METRICS, { id: 'dep_missing', ...range, step: 1 })).errors?.[0].extensions.code).toBe('NOT_FOUND');
    const badInput = async (variables: Record<string, unknown>) => (await graphql(METRICS, { id: deployment.id, ...range, step: 1, ...variables })).errors?.[0].extensions;
    expect(await badInput({ to: range.from })).toEqual({ code: 'BAD_USER_INPUT', param: 'to' });
    expect(await badInput({ step: 0 })).toEqual({ code: 'BAD_USER_INPUT', param: 'stepMinutes' });
    expect(await badInput({ step: 1_441 })).toEqual({ code: 'BAD_USER_INPUT', param: 'stepMinutes' });
    expect(await badInput({ from: new Date(Date.now() - 30 * 86_400_000).toISOString() })).toEqual({ code: 'BAD_USER_INPUT', param: 'stepMinutes' });
  });

  it('deletes minutes past METRICS_HISTORY_RETENTION_DAYS', async () => {
    const old = new Date(Math.floor(Date.now() / MINUTE) * MINUTE - 31 * 86_400_000);
    await query('INSERT INTO deployment_metrics_minutes (deployment_id, minute, requests) VALUES ($1, $2, 1)', [deployment.id, old]);
    await waitFor(async () => (await query('SELECT count(*)::int AS n FROM deployment_metrics_minutes WHERE minute = $1', [old]))[0].n === 0, 10_000, 'the old minute swept');
  });
});
