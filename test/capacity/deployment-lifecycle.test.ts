import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { chatOnce, userChat } from '../support/chat';
import { graphqlClient } from './support/graphql-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/** The console lifecycle over GraphQL on the local provider, and what the /v1 endpoint does in each state. */
describe('deployment lifecycle (local provider)', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { capacityIntervalMs: 100 } });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const chat = (baseUrl: string) => chatOnce(baseUrl, workspace.apiKey, userChat('hi', { max_tokens: 3 }));
  const deployment = async (id: string) => (await graphql(`query($id: ID!) { deployment(id: $id) {
    id status statusReason desiredReplicas minReplicas maxReplicas autoscale priceCapPerHour progress sharing baseUrl
    replicas { id status statusReason pricePerHour gpuName offerId loadPercent startedAt terminatedAt } } }`, { id })).data.deployment;

  it('creates (Creating → Running), edits the replica range without dropping traffic, pauses (503), resumes, deletes (404)', async () => {
    const created = await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 1.5}) { deployment { id status baseUrl desiredReplicas sharing } } }`);
    const { id, baseUrl } = created.data.createDeployment.deployment;
    expect(created.data.createDeployment.deployment).toMatchObject({ status: 'Creating', desiredReplicas: 1, sharing: 'not_shared' });
    await waitFor(async () => (await deployment(id)).status === 'Running', 20_000, 'Running');
    const running = await deployment(id);
    expect(running.replicas).toHaveLength(1);
    expect(running.replicas[0]).toMatchObject({ status: 'Running', offerId: 'local', gpuName: 'cpu', pricePerHour: 0, loadPercent: 100 });
    expect((await chat(baseUrl)).status).toBe(200);

    // Edit: two replicas at least; requests keep flowing while the second starts.
    const edited = await graphql(`mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: 2, maxReplicas: 3, priceCapPerHour: 2}) { minReplicas maxReplicas desiredReplicas priceCapPerHour } }`, { id });
    expect(edited.data.updateDeployment).toEqual({ minReplicas: 2, maxReplicas: 3, desiredReplicas: 2, priceCapPerHour: 2 });
    const during = await Promise.all([chat(baseUrl), chat(baseUrl), chat(baseUrl)]);
    expect(during.map((result) => result.status)).toEqual([200, 200, 200]);
    await test.waitForReplicas(id, 2);
    const bad = await graphql(`mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: 4}) { id } }`, { id });
    expect(bad.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'maxReplicas' });
    const back = await graphql(`mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: 1, maxReplicas: 1}) { desiredReplicas } }`, { id });
    expect(back.data.updateDeployment.desiredReplicas).toBe(1);
    await waitFor(async () => (await deployment(id)).replicas.filter((replica: any) => replica.status !== 'Terminated').length === 1, 10_000, 'scale down to 1');
    expect((await chat(baseUrl)).status).toBe(200);

    const paused = await graphql(`mutation($id: ID!) { pauseDeployment(id: $id) { status } }`, { id });
    expect(paused.data.pauseDeployment.status).toBe('Paused');
    const whilePaused = await chat(baseUrl);
    expect(whilePaused.status).toBe(503);
    expect(whilePaused.body.error).toMatchObject({ code: 'deployment_paused' });
    expect((await deployment(id)).replicas.every((replica: any) => replica.status === 'Terminated')).toBe(true);
    const illegal = await graphql(`mutation($id: ID!) { pauseDeployment(id: $id) { status } }`, { id });
    expect(illegal.errors?.[0].extensions.code).toBe('INVALID_STATE_TRANSITION');

    expect((await graphql(`mutation($id: ID!) { resumeDeployment(id: $id) { status } }`, { id })).data.resumeDeployment.status).toBe('Creating');
    await waitFor(async () => (await deployment(id)).status === 'Running', 20_000, 'Running again');
    expect((await chat(baseUrl)).status).toBe(200);

    expect((await graphql(`mutation($id: ID!) { deleteDeployment(id: $id) { status } }`, { id })).data.deleteDeployment.status).toBe('Deleted');
    const gone = await chat(baseUrl);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('deployment_not_found');
    const afterDelete = await graphql(`mutation($id: ID!) { resumeDeployment(id: $id) { status } }`, { id });
    expect(afterDelete.errors?.[0].extensions.code).toBe('NOT_FOUND');
  });

  it('refuses invalid settings with a message naming the field', async () => {
    const cases: Array<[string, string]> = [
      [`{modelId: "${CHAT_MODEL}", priceCapPerHour: 0}`, 'priceCapPerHour'],
      [`{modelId: "${CHAT_MODEL}", priceCapPerHour: 1, minReplicas: 0}`, 'minReplicas'],
      [`{modelId: "${CHAT_MODEL}", priceCapPerHour: 1, minReplicas: 3, maxReplicas: 2}`, 'maxReplicas'],
      [`{modelId: "${CHAT_MODEL}", priceCapPerHour: 1, provider: "moon"}`, 'provider'],
      [`{modelId: "acme/unknown", priceCapPerHour: 1}`, 'model'],
    ];
    for (const [input, param] of cases) {
      const result = await graphql(`mutation { createDeployment(input: ${input}) { deployment { id } } }`);
      expect(result.errors?.[0].extensions.param).toBe(param);
      expect(result.errors?.[0].message).toContain(param === 'model' ? 'acme/unknown' : param);
    }
    const { id } = await test.createDeployment(workspace);
    for (const limit of [0, 501]) {
      const result = await graphql('query($id: ID!, $limit: Int!) { deployment(id: $id) { scalingDecisions(limit: $limit) { action } } }', { id, limit });
      expect(result.errors?.[0]).toMatchObject({ message: 'limit must be an integer from 1 to 500', extensions: { code: 'BAD_USER_INPUT', param: 'limit' } });
    }
  });

  it('limits query depth and complexity, with typed error codes', async () => {
    const deep = await graphql('{ deployments { replicas { id } scalingDecisions { reason } } }');
    expect(deep.errors).toBeUndefined();
    const nested = 'a'.repeat(0);
    const tooComplex = await graphql(`{ deployments { replicas { id status statusReason provider agentId engineKind } scalingDecisions(limit: 500) { reason explanation signal inputs action decidedAt } } }${nested}`);
    expect(tooComplex.errors?.[0].extensions.code).toBe('QUERY_TOO_COMPLEX');
    const fragmentLoop = await graphql('query { catalog { ...A } } fragment A on CatalogModel { id videoSpec { fps } }');
    expect(fragmentLoop.errors).toBeUndefined();
  });

  it('a platform write holding a copy read before a pause or an edit does not undo them', async () => {
    const { deployments, deploymentStore } = test.server.controlPlane;
    const { id } = await test.createDeployment(workspace, { maxReplicas: 3, autoscale: true });
    await test.waitForReplicas(id, 1);
    const stale = await deployments.get(workspace.workspaceId, id);

    // A user edit, then the autoscaler writing from its older copy: the edit stands, and the
    // autoscaler's count is clamped to the range the row has now.
    await deployments.update(workspace.workspaceId, id, { maxReplicas: 2 });
    const scaled = await deployments.setDesiredReplicas(stale, 3);
    expect(scaled).toMatchObject({ maxReplicas: 2, desiredReplicas: 2 });

    // A pause, then the same stale copy again: still Paused, the desired count untouched, and a
    // status-reason write for the old status changes nothing.
    await deployments.pause(workspace.workspaceId, id);
    expect(await deployments.setDesiredReplicas(stale, 3)).toMatchObject({ status: 'Paused', desiredReplicas: 2 });
    expect(await deploymentStore.transition(stale, stale.status, 'replicas starting')).toMatchObject({ status: 'Paused', statusReason: 'paused by user' });
    expect(await deployments.get(workspace.workspaceId, id)).toMatchObject({ status: 'Paused', maxReplicas: 2, desiredReplicas: 2 });
  });
});
