import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient, OPERATOR_TOKEN } from './support/graphql-client';

/** A small model so a handful of slow requests is a lot of load: 2 in flight per replica. */
const MODEL = {
  id: 'test/autoscaled-chat', name: 'Autoscaled chat (tests)', modality: 'text', task: 'chat', engine: 'cpu', official: false,
  gpuMemoryGb: 1, inputModalities: ['text'], sizes: [], targetConcurrency: 2,
};

/** The autoscaler with real agents and real load: up fast, down after its window, every decision explained. */
describe('autoscaling under generated load', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    test = await startTestServer({
      controlPlane: {
        operatorToken: OPERATOR_TOKEN, capacityIntervalMs: 100, autoscaleWindowMs: 300, autoscaleScaleDownStabilizationMs: 1_500,
        localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' },
      },
    });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    const registered = await graphqlClient(test.url, OPERATOR_TOKEN)('mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id targetConcurrency } }', { spec: MODEL });
    expect(registered.data.registerCatalogModel).toEqual({ id: MODEL.id, targetConcurrency: 2 });
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('scales up under load and back down after the stabilisation window, recording why', async () => {
    const created = await graphql(`mutation { createDeployment(input: {modelId: "${MODEL.id}", priceCapPerHour: 1, minReplicas: 1, maxReplicas: 3, autoscale: true}) {
      deployment { id baseUrl } } }`);
    const { id, baseUrl } = created.data.createDeployment.deployment;
    await test.waitForReplicas(id, 1);
    const state = async () => (await graphql(`query($id: ID!) { deployment(id: $id) { desiredReplicas replicas { status }
      scalingDecisions(limit: 200) { action reason explanation signal targetConcurrency currentReplicas wantedReplicas desiredReplicas inputs } } }`, { id })).data.deployment;

    // Load: six slow streams at a time (about 3 s each) against 2 per replica → 3 replicas wanted.
    let loading = true;
    const worker = async () => {
      while (loading) {
        const response = await fetch(`${baseUrl}/chat/completions`, {
          method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({ messages: [{ role: 'user', content: 'tell me a long story' }], stream: true, max_tokens: 30, cpu_engine: { tokens_per_second: 10 } }),
        });
        await response.text();
      }
    };
    const workers = Array.from({ length: 6 }, () => worker());
    try {
      await waitFor(async () => (await state()).desiredReplicas === 3, 15_000, 'a scale-up to 3');
      await test.waitForReplicas(id, 3, 20_000);
    } finally {
      loading = false;
      await Promise.all(workers);
    }
    // Newest first: the last scale_up in the list is the first one made. A capacity pass can
    // run between the deployment's row and its first replica's, and then records bringing the
    // deployment up to its minimum (0 → 1, no load): that one is not the load-driven decision.
    const ups = (await state()).scalingDecisions.filter((decision: any) => decision.action === 'scale_up');
    for (const boot of ups.filter((decision: any) => decision.currentReplicas === 0)) expect(boot).toMatchObject({ reason: 'at_min', desiredReplicas: 1 });
    const up = ups.filter((decision: any) => decision.currentReplicas > 0).at(-1);
    expect(up).toMatchObject({ targetConcurrency: 2, currentReplicas: 1 });
    expect(up.signal).toBeGreaterThan(2);
    expect(up.desiredReplicas).toBeGreaterThan(1);
    expect(up.explanation.length).toBeGreaterThan(20);
    expect(JSON.parse(up.inputs)).toMatchObject({ minReplicas: 1, maxReplicas: 3, autoscale: true });

    // Idle now: down one replica at a time, only after the 1.5 s window, and never below min.
    await waitFor(async () => (await state()).desiredReplicas === 1, 20_000, 'a scale-down to 1');
    await waitFor(async () => (await state()).replicas.filter((replica: any) => replica.status !== 'Terminated').length === 1, 10_000, 'surplus replicas released');
    const decisions = (await state()).scalingDecisions;
    const downs = decisions.filter((decision: any) => decision.action === 'scale_down');
    expect(downs.length).toBeGreaterThanOrEqual(2);
    expect(downs.every((decision: any) => decision.currentReplicas - decision.desiredReplicas === 1)).toBe(true);
    expect(decisions.some((decision: any) => decision.reason === 'stabilizing_down' || decision.reason === 'at_min')).toBe(true);
    const metrics = await (await fetch(`${test.url}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`inference_autoscaler_decisions_total\\{deployment="${id}",action="scale_up",policy="concurrency"\\} [1-9]`));
  });
});
