import OpenAI from 'openai';
import { startTestServer, startWithDeployment, waitFor, type ServerWithDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient } from '../capacity/support/graphql-client';
import { ClusterScalingSignals } from '../../control-plane/autoscaling/cluster-scaling-signals';
import type { ServerRegistry } from '../../control-plane/cluster/server-registry';

const MINUTE = 60_000;
const HISTORY = `query($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!, $step: Int! = 1) { deployment(id: $id) { autoscalingHistory(from: $from, to: $to, stepMinutes: $step) {
  at requests sloRequests withinSlo attainment arrivalsPerSecond forecastArrivalsPerSecond replicas gpuCost fixedMaxCost } } }`;

/** What every server publishes of the deployment's arrivals, summed, as the autoscaler's server reads its registry. */
function clusterArrivals(registry: ServerRegistry, deploymentId: string): number {
  const rows = [registry.loadSnapshot(), ...registry.peers().map((peer) => peer.load)];
  return rows.reduce((sum, load) => sum + (load[deploymentId]?.traffic?.arrivals ?? 0), 0);
}

/**
 * The console's autoscaling history (issue 39): `Deployment.autoscalingHistory` per minute, from
 * the minute rollups every server writes (arrivals, requests judged against the SLO) and the
 * recorded decisions (the forecast); cost against fixed-max. Two servers share the database:
 * requests that arrive at either count once, on the server they reached.
 */
describe('autoscaling history', () => {
  let serverA: ServerWithDeployment;
  let serverB: TestServer;
  let graphql: ReturnType<typeof graphqlClient>;
  const openaiAt = (baseUrl: string) => new OpenAI({ baseURL: baseUrl, apiKey: serverA.workspace.apiKey, maxRetries: 0 });

  beforeAll(async () => {
    serverA = await startWithDeployment({
      controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' }, clusterHeartbeatIntervalMs: 100 },
      deployment: { slo: { ttftP95Ms: 1_000 } },
    });
    serverB = await startTestServer({ databaseUrl: serverA.test.databaseUrl, controlPlane: { localAgents: false, clusterHeartbeatIntervalMs: 100 } });
    graphql = graphqlClient(serverA.test.url, serverA.workspace.apiKey);
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.test.stop();
  });

  it('counts arrivals on every server and judges streamed requests against the TTFT target, minute by minute', async () => {
    const { deployment, modelId } = serverA;
    const signals = new ClusterScalingSignals(() => {
      const registry = serverA.test.server.controlPlane.registry;
      return [{ serverId: registry.serverId, load: registry.loadSnapshot() }, ...registry.peers().map((peer) => ({ serverId: peer.id, load: peer.load }))];
    }, { minRateSpanMs: 1 });
    const startedAt = Date.now();
    signals.observe(deployment.id, startedAt);

    const streamed = async (client: OpenAI, ttftMs: number) => {
      const stream = await client.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true, cpu_engine: { ttft_ms: ttftMs } } as never);
      for await (const _chunk of stream as unknown as AsyncIterable<unknown>) { /* read to the end */ }
    };
    const onA = openaiAt(deployment.baseUrl);
    // Three fast streams and two whose first token the engine holds 1.5 s (over the 1 s target), one answer in one piece (no TTFT).
    await Promise.all([streamed(onA, 0), streamed(onA, 0), streamed(onA, 0), streamed(onA, 1_500), streamed(onA, 1_500)]);
    await onA.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
    // Two arrive at server B, which has no replica of its own: it relays them or answers 503; they arrived either way.
    const onB = openaiAt(`${serverB.url}/d/${deployment.slug}/v1`);
    const atB = await Promise.all([0, 1].map(() => onB.chat.completions.create({ model: modelId, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }).then(() => 'ok', (error) => error.status)));
    expect(atB.every((outcome) => outcome === 'ok' || outcome === 503)).toBe(true);

    // The autoscaler's server sees all eight: its own six now, B's two with B's next registry heartbeat.
    await waitFor(() => clusterArrivals(serverA.test.server.controlPlane.registry, deployment.id) === 8, 10_000, 'eight arrivals over both servers');
    const seen = signals.observe(deployment.id, Date.now());
    expect(seen.arrivalsPerSecond).toBeGreaterThan(0);
    expect(seen.idleMs).toBeLessThan(Date.now() - startedAt);
    expect(seen.observedP95Ms).toBeGreaterThanOrEqual(1_000);

    await Promise.all([serverA.test.server.controlPlane.rollupWriter.flush(), serverB.server.controlPlane.rollupWriter.flush()]);
    const from = new Date(startedAt - MINUTE);
    const to = new Date(Date.now() + MINUTE);
    const result = await graphql(HISTORY, { id: deployment.id, from: from.toISOString(), to: to.toISOString() });
    expect(result.errors).toBeUndefined();
    const points: any[] = result.data.deployment.autoscalingHistory;
    // Every minute of the range is there, oldest first.
    expect(points.length).toBe(Math.ceil(to.getTime() / MINUTE) - Math.floor(from.getTime() / MINUTE));
    expect(points.map((point) => Date.parse(point.at))).toEqual(points.map((_, index) => (Math.floor(from.getTime() / MINUTE) + index) * MINUTE));
    const sum = (field: string) => points.reduce((total, point) => total + point[field], 0);
    expect(Math.round(sum('arrivalsPerSecond') * 60)).toBe(8);
    expect(sum('sloRequests')).toBe(5);
    expect(sum('withinSlo')).toBe(3);
    for (const point of points) {
      expect(point.attainment).toBe(point.sloRequests > 0 ? point.withinSlo / point.sloRequests : null);
      expect(point.forecastArrivalsPerSecond).toBeNull(); // the concurrency policy does not forecast
    }
  });

  it('judges a media job by its queue wait where it starts, and counts its arrival', async () => {
    const { test, workspace } = serverA;
    const image = await test.createDeployment(workspace, { modelId: 'black-forest-labs/FLUX.1-schnell', slo: { queueWaitP95Ms: 600_000 } });
    await test.waitForReplicas(image.id, 1);
    const startedAt = Date.now();
    const client = new OpenAI({ baseURL: image.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    await client.images.generate({ model: 'black-forest-labs/FLUX.1-schnell', prompt: 'a lighthouse', size: '512x512', response_format: 'b64_json' });
    await test.server.controlPlane.rollupWriter.flush();
    const result = await graphql(HISTORY, { id: image.id, from: new Date(startedAt - MINUTE).toISOString(), to: new Date(Date.now() + MINUTE).toISOString() });
    const points: any[] = result.data.deployment.autoscalingHistory;
    const sum = (field: string) => points.reduce((total, point) => total + point[field], 0);
    expect([sum('sloRequests'), sum('withinSlo'), Math.round(sum('arrivalsPerSecond') * 60)]).toEqual([1, 1, 1]);
  });

  it('prices fixed-max at the range\'s cost per replica-minute and averages the minute\'s forecasts, from the stored rows', async () => {
    const { test, workspace } = serverA;
    const other = await test.createDeployment(workspace, { provider: 'external' as never, minReplicas: 1, maxReplicas: 4 });
    const dataSource = test.server.controlPlane.dataSource;
    // Three minutes well after the deployment was created: 2 replicas at $0.02 a minute each, then 1, then none.
    const base = (Math.floor(Date.now() / MINUTE) + 120) * MINUTE;
    const minute = (index: number) => new Date(base + index * MINUTE);
    await dataSource.query(`INSERT INTO deployment_metrics_minutes (deployment_id, minute, requests, arrivals, slo_requests, within_slo, replicas, gpu_cost_usd) VALUES
      ($1, $2, 10, 120, 8, 6, 2, 0.04), ($1, $3, 4, 30, 0, 0, 1, 0.02), ($1, $4, 0, 0, 0, 0, 0, 0)`, [other.id, minute(0), minute(1), minute(2)]);
    const decision = (at: Date, forecast: number | null) => dataSource.query(`INSERT INTO scaling_decisions (deployment_id, workspace_id, decided_at, action, reason, explanation,
      signal, target_concurrency, current_replicas, wanted_replicas, desired_replicas, inputs, policy, moved_by, forecast_arrivals_per_second)
      VALUES ($1, $2, $3, 'hold', 'slo_forecast', 'x', 0, 32, 2, 2, 2, '{}', 'slo', 'forecast', $4)`, [other.id, workspace.workspaceId, at, forecast]);
    await decision(new Date(base + 5_000), 1.5);
    await decision(new Date(base + 35_000), 2.5);
    await decision(new Date(base + MINUTE + 5_000), null);

    const result = await graphql(HISTORY, { id: other.id, from: minute(0).toISOString(), to: minute(3).toISOString() });
    expect(result.errors).toBeUndefined();
    expect(result.data.deployment.autoscalingHistory).toEqual([
      { at: minute(0).toISOString(), requests: 10, sloRequests: 8, withinSlo: 6, attainment: 0.75, arrivalsPerSecond: 2, forecastArrivalsPerSecond: 2, replicas: 2, gpuCost: 0.04, fixedMaxCost: expect.closeTo(0.08, 10) },
      { at: minute(1).toISOString(), requests: 4, sloRequests: 0, withinSlo: 0, attainment: null, arrivalsPerSecond: 0.5, forecastArrivalsPerSecond: null, replicas: 1, gpuCost: 0.02, fixedMaxCost: expect.closeTo(0.08, 10) },
      { at: minute(2).toISOString(), requests: 0, sloRequests: 0, withinSlo: 0, attainment: null, arrivalsPerSecond: 0, forecastArrivalsPerSecond: null, replicas: 0, gpuCost: 0, fixedMaxCost: expect.closeTo(0.08, 10) },
    ]);
    // In one step of three minutes: sums, the most replicas, the mean rates.
    const step = await graphql(HISTORY, { id: other.id, from: minute(0).toISOString(), to: minute(3).toISOString(), step: 3 });
    expect(step.data.deployment.autoscalingHistory).toEqual([{
      at: minute(0).toISOString(), requests: 14, sloRequests: 8, withinSlo: 6, attainment: 0.75, arrivalsPerSecond: expect.closeTo(150 / 180, 10),
      forecastArrivalsPerSecond: 2, replicas: 2, gpuCost: expect.closeTo(0.06, 10), fixedMaxCost: expect.closeTo(0.24, 10),
    }]);
    // Before the deployment existed fixed-max cost nothing.
    const tenMinutesAgo = (Math.floor(Date.now() / MINUTE) - 10) * MINUTE;
    const before = await graphql(HISTORY, { id: other.id, from: new Date(tenMinutesAgo).toISOString(), to: new Date(tenMinutesAgo + 2 * MINUTE).toISOString() });
    expect(before.data.deployment.autoscalingHistory.map((point: any) => point.fixedMaxCost)).toEqual([0, 0]);
  });

  it('refuses a range that is not one, longer than a week, or in more than 1500 steps, naming the field', async () => {
    const { deployment } = serverA;
    const from = '2026-11-01T00:00:00.000Z';
    const week = '2026-11-08T00:00:00.000Z';
    const cases: Array<[string, string, number, string, RegExp]> = [
      [from, from, 1, 'to', /^to must be after from$/],
      [from, '2026-10-31T00:00:00.000Z', 1, 'to', /^to must be after from$/],
      [from, '2026-11-08T00:01:00.000Z', 60, 'to', /^from\.\.to may span at most 7 days \(10080 minutes\), got 10081 minutes$/],
      [from, week, 1, 'stepMinutes', /^from\.\.to at stepMinutes 1 is 10080 points; at most 1500: use a larger stepMinutes or a shorter range$/],
      [from, week, 0, 'stepMinutes', /^stepMinutes must be an integer from 1 to 1440, got 0$/],
      [from, week, 1_441, 'stepMinutes', /^stepMinutes must be an integer from 1 to 1440, got 1441$/],
    ];
    for (const [start, end, step, param, message] of cases) {
      const result = await graphql(HISTORY, { id: deployment.id, from: start, to: end, step });
      expect(result.data?.deployment ?? null).toBeNull();
      expect(result.errors?.[0]).toMatchObject({ message: expect.stringMatching(message), extensions: { code: 'BAD_USER_INPUT', param } });
    }
    const weekly = await graphql(HISTORY, { id: deployment.id, from, to: week, step: 7 });
    expect(weekly.data.deployment.autoscalingHistory).toHaveLength(1_440);
  });

  it('is the workspace\'s own: another workspace reads none of it, through GraphQL or the control plane', async () => {
    const { test, deployment } = serverA;
    const intruder: TestWorkspace = await test.createWorkspace();
    const theirs = graphqlClient(test.url, intruder.apiKey);
    const range = { from: new Date(Date.now() - 5 * MINUTE).toISOString(), to: new Date().toISOString() };
    const denied = await theirs(HISTORY, { id: deployment.id, ...range });
    expect(denied.data?.deployment ?? null).toBeNull();
    expect(denied.errors?.[0].extensions.code).toBe('FORBIDDEN');
    // The history hangs off a Deployment, and no query hands another workspace's Deployment out.
    const listed = await theirs('{ deployments { id } }');
    expect(listed.data.deployments).toEqual([]);
    await expect(test.server.controlPlane.metricsHistory.autoscaling(intruder.workspaceId, deployment.id, new Date(range.from), new Date(range.to)))
      .rejects.toMatchObject({ code: 'not_found' });
  });
});
