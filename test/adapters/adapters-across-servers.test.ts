import OpenAI, { toFile } from 'openai';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlAs, subscribe } from '../security/support/security-client';
import { loraGguf } from './support/lora-files';

/**
 * Two servers on one database: an adapter registered and attached through one is known to the
 * other's request path and subscribers at once, though its name cache would keep the old answer
 * for 10 minutes: the change can only have come by notification (cluster topic `adapter`).
 */
describe('adapters across servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let workspace: TestWorkspace;
  let deployment: TestDeployment;

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: { adapters: { cacheTtlMs: 600_000 } } });
    // One object store, as servers behind a load balancer share S3.
    serverB = await startTestServer({ databaseUrl: serverA.databaseUrl, dataDir: serverA.dataDir, controlPlane: { adapters: { cacheTtlMs: 600_000 }, localAgents: false } });
    workspace = await serverA.createWorkspace();
    deployment = await serverA.createDeployment(workspace, { provider: 'external' });
  });

  afterAll(async () => {
    await serverB?.stop();
    await serverA?.stop();
  });

  it('a change made on A reaches B\'s name cache and B\'s subscribers', async () => {
    const onB = new OpenAI({ apiKey: workspace.apiKey, baseURL: `${serverB.url}/d/${deployment.slug}/v1`, maxRetries: 0 });
    const baseModel = serverA.server.controlPlane.catalog.defaultChatModel().id;
    // B caches the workspace's adapters: none.
    expect((await onB.models.list()).data.map((model) => model.id)).toEqual([baseModel]);
    const events = subscribe(serverB.url, `Bearer ${workspace.apiKey}`, 'subscription { adapterUpdated { name deleted deployments { id } } }');
    await events.ready;
    try {
      const asA = graphqlAs(serverA.url, workspace.apiKey);
      const file = await onB.files.create({ file: await toFile(loraGguf(), 'a.gguf'), purpose: 'user_data' });
      const created = await asA('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name: 'everywhere', baseModel, fileId: file.id } });
      expect(created.body.errors).toBeUndefined();
      const attached = await asA('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: created.body.data!.createAdapter.id, d: deployment.id });
      expect(attached.body.errors).toBeUndefined();
      await waitFor(async () => (await onB.models.list()).data.some((model) => model.id === 'everywhere'), 5_000, 'B to list the adapter');
      await waitFor(() => events.events.length >= 2, 5_000, 'B\'s subscriber to hear both changes');
      expect(events.events.map((event) => event.adapterUpdated)).toEqual([
        { name: 'everywhere', deleted: false, deployments: [] },
        { name: 'everywhere', deleted: false, deployments: [{ id: deployment.id }] },
      ]);
      await asA('mutation($id: ID!) { deleteAdapter(id: $id) { id } }', { id: created.body.data!.createAdapter.id });
      await waitFor(() => events.events.length >= 3, 5_000, 'B\'s subscriber to hear the deletion');
      expect(events.events[2].adapterUpdated).toEqual({ name: 'everywhere', deleted: true, deployments: [] });
      expect((await onB.models.list()).data.map((model) => model.id)).toEqual([baseModel]);
    } finally {
      events.stop();
    }
  });
});
