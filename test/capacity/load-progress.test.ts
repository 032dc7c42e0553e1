import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient } from './support/graphql-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
// Long enough that a cached start (an agent process and its engine, ~1–2.5 s on a loaded 2-core CI
// machine: 2,535 ms once beside the whole suite) is still clearly shorter than a download.
const DOWNLOAD_MS = 4_000;

interface ReplicaView { id: string; status: string; statusReason: string | null; loadPercent: number | null }
interface DeploymentView { id: string; status: string; progress: number | null; replicas: ReplicaView[] }

/**
 * A deployment's first replica reports its model download as it goes (agents join before the
 * model is loaded), over GraphQL queries and the deploymentUpdated subscription; a second
 * deployment of the same model on the same machine finds the weights cached.
 */
describe('model download progress while Creating (local provider)', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { capacityIntervalMs: 100, localModelDownloadMs: DOWNLOAD_MS } });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
  });

  afterAll(async () => {
    await test?.stop();
  });

  const view = async (id: string): Promise<DeploymentView> => (await graphql(`query($id: ID!) { deployment(id: $id) {
    id status progress replicas { id status statusReason loadPercent } } }`, { id })).data.deployment;
  const create = async (): Promise<string> => (await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 1}) { deployment { id } } }`)).data.createDeployment.deployment.id;

  it('shows the download percentage and stage, rising, then Running at 100 %; the next deployment of the model loads from cache', async () => {
    const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
    const pushed: DeploymentView[] = [];
    const subscription = client.iterate<{ deploymentUpdated: DeploymentView }>({ query: 'subscription { deploymentUpdated { id status progress replicas { id status statusReason loadPercent } } }' });
    const collecting = (async () => {
      for await (const event of subscription) pushed.push(event.data!.deploymentUpdated);
    })().catch(() => {});
    try {
      await new Promise((resolve) => setTimeout(resolve, 200));
      const startedAt = Date.now();
      const id = await create();
      const polled: DeploymentView[] = [];
      await waitFor(async () => {
        const current = await view(id);
        polled.push(current);
        return current.status === 'Running';
      }, 20_000, 'Running');
      const tookMs = Date.now() - startedAt;

      const loading = polled.filter((snapshot) => snapshot.status === 'Creating' && (snapshot.progress ?? 0) > 0);
      expect(loading.length).toBeGreaterThanOrEqual(2);
      for (const snapshot of loading) {
        expect(snapshot.progress).toBeLessThan(100);
        expect(snapshot.replicas[0].loadPercent).toBe(snapshot.progress);
        expect(snapshot.replicas[0].statusReason).toMatch(/^(downloading the model weights|loading the weights into memory): \d+ %$/);
      }
      const percents = loading.map((snapshot) => snapshot.progress as number);
      expect(percents).toEqual([...percents].sort((a, b) => a - b));
      expect(percents[percents.length - 1]).toBeGreaterThan(percents[0]);
      // The replica is Running only once the load is over, and right after it (no heartbeat interval lost).
      expect(tookMs).toBeGreaterThanOrEqual(DOWNLOAD_MS);
      const running = await view(id);
      expect(running).toMatchObject({ status: 'Running', progress: null });
      expect(running.replicas[0]).toMatchObject({ status: 'Running', loadPercent: 100, statusReason: null });

      // The subscription carried the progress too, without polling.
      await waitFor(async () => pushed.some((update) => update.id === id && update.status === 'Running'), 5_000, 'Running pushed');
      const pushedPercents = pushed.filter((update) => update.id === id && update.status === 'Creating').map((update) => update.progress ?? 0);
      expect(new Set(pushedPercents.filter((percent) => percent > 0 && percent < 100)).size).toBeGreaterThanOrEqual(3);

      // Same model, same machine: the weights are cached, so no download.
      const cachedStartedAt = Date.now();
      const second = await create();
      await waitFor(async () => (await view(second)).status === 'Running', 20_000, 'second Running');
      // Its replica's start-up has no download phase, where the first one's downloaded for most of
      // DOWNLOAD_MS (judged by the phases, not the clock: a loaded machine's agent spawn alone once
      // took 5.1 s); and no progress is pushed.
      const downloads = async (deploymentId: string) => ((await test.server.controlPlane.dataSource.query(
        'SELECT startup_phases FROM replicas WHERE deployment_id = $1', [deploymentId])) as Array<{ startup_phases: Array<{ name: string; durationMs: number }> }>)
        .flatMap((row) => row.startup_phases.filter((phase) => phase.name === 'download'));
      expect((await downloads(id)).map((phase) => phase.durationMs)).toEqual([expect.any(Number)]);
      expect((await downloads(id))[0].durationMs).toBeGreaterThanOrEqual(DOWNLOAD_MS * 0.8 * 0.9);
      expect(await downloads(second)).toEqual([]);
      expect(Date.now() - cachedStartedAt).toBeLessThan(20_000);
      const secondPushed = pushed.filter((update) => update.id === second && update.status === 'Creating');
      expect(secondPushed.every((update) => (update.progress ?? 0) === 0)).toBe(true);
    } finally {
      await client.dispose();
      await collecting;
    }
  });
});
