import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient } from './support/graphql-client';

const CHAT_MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

interface PhaseView { name: string; durationMs: number; done: boolean; detail: string; bytes: number | null; startedAt: string }
interface ReplicaView {
  id: string; status: string; statusReason: string | null; createdAt: string; startedAt: string | null; terminatedAt: string | null;
  startupMs: number | null; startFailure: string | null; startupPhases: PhaseView[];
}
interface DeploymentView { id: string; status: string; statusReason: string | null; replicaStartFailures: number; replicas: ReplicaView[] }

const DEPLOYMENT_QUERY = `query($id: ID!) { deployment(id: $id) { id status statusReason replicaStartFailures
  replicas { id status statusReason createdAt startedAt terminatedAt startupMs startFailure startupPhases { name durationMs done detail bytes startedAt } } } }`;

/** One metric sample's value from the Prometheus text, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/**
 * Cold starts on real agent processes whose CPU engine acts out a GPU start-up
 * (WORKER_STARTUP_PHASES_MS): the replica shows each phase with its time and its whole cold
 * start; and a replica whose engine never gets ready is replaced after the start-up deadline,
 * with growing delays, counted, its phases showing where it stuck.
 */
describe('cold starts', () => {
  describe('an agent that acts out a download, a load and a warm-up', () => {
    let test: TestServer;
    let workspace: TestWorkspace;
    let graphql: ReturnType<typeof graphqlClient>;

    beforeAll(async () => {
      test = await startTestServer({
        controlPlane: { capacityIntervalMs: 100, localAgentEnv: { WORKER_STARTUP_PHASES_MS: 'download=400,load=200,warm_up=100' } },
      });
      workspace = await test.createWorkspace();
      graphql = graphqlClient(test.url, workspace.apiKey);
    });

    afterAll(async () => {
      await test?.stop();
    });

    it('the replica shows each start-up phase with its time, where it is while starting, its cold start once ready, and /metrics has them', async () => {
      // Every change of the deployment is pushed: the start-up as it goes, phase by phase.
      const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
      const pushed: DeploymentView[] = [];
      const subscription = client.iterate<{ deploymentUpdated: DeploymentView }>({ query: 'subscription { deploymentUpdated { id replicas { status startupPhases { name done } } } }' });
      const collecting = (async () => {
        for await (const event of subscription) pushed.push(event.data!.deploymentUpdated);
      })().catch(() => {});
      let id: string;
      try {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const created = await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 1}) { deployment { id } } }`);
        id = created.data.createDeployment.deployment.id;
        await test.waitForReplicas(id, 1);
        await waitFor(async () => pushed.some((update) => update.id === id && update.replicas[0]?.status === 'Running'), 10_000, 'Running pushed');
      } finally {
        await client.dispose();
        await collecting;
      }
      // While it started: each phase in turn, under way and not done yet.
      const starting = pushed.filter((update) => update.id === id && update.replicas[0]?.status === 'Creating');
      for (const name of ['download', 'load', 'warm_up']) {
        expect(starting.some((update) => update.replicas[0].startupPhases.some((phase) => phase.name === name && !phase.done))).toBe(true);
      }
      const view = async (): Promise<DeploymentView> => (await graphql(DEPLOYMENT_QUERY, { id })).data.deployment;
      const [replica] = (await view()).replicas;
      expect(replica.startupPhases.map((phase) => [phase.name, phase.done])).toEqual([['provision', true], ['download', true], ['load', true], ['warm_up', true]]);
      const byName = Object.fromEntries(replica.startupPhases.map((phase) => [phase.name, phase]));
      // Each acted-out phase took about its length, each more than the next phase's. Not "at least":
      // the phases are timed with Date.now, and a timer counts from the event loop's cached time,
      // older than Date.now by however long the loop's turn had run (398 ms for 400 once on CI).
      expect(byName.download.durationMs).toBeGreaterThanOrEqual(300);
      expect(byName.load.durationMs).toBeGreaterThanOrEqual(150);
      expect(byName.warm_up.durationMs).toBeGreaterThanOrEqual(75);
      expect(byName.provision.detail).toBe('local: placed until its agent said Hello');
      expect(byName.download.detail).toBe('acted out by the CPU engine');
      expect(byName.download.bytes).toBe(0);
      expect(byName.load.bytes).toBeNull();
      // The phases follow one another, and the cold start covers them all: placement to ready.
      const starts = replica.startupPhases.map((phase) => Date.parse(phase.startedAt));
      expect(starts).toEqual([...starts].sort((a, b) => a - b));
      expect(replica.startupMs).toBe(Date.parse(replica.startedAt!) - Date.parse(replica.createdAt));
      expect(replica.startupMs!).toBeGreaterThanOrEqual(700);
      expect(replica.startFailure).toBeNull();
      expect((await view()).replicaStartFailures).toBe(0);

      const metrics = await (await fetch(`${test.url}/metrics`)).text();
      for (const phase of ['provision', 'download', 'load', 'warm_up']) {
        expect(sample(metrics, `inference_replica_startup_phase_seconds_count{phase="${phase}"}`)).toBe(1);
      }
      // What the histogram observed is what the replica shows (a download of at least 0.4 s is above the 0.25 s bucket).
      expect(sample(metrics, 'inference_replica_startup_phase_seconds_sum{phase="download"}')).toBeCloseTo(byName.download.durationMs / 1000, 3);
      expect(sample(metrics, 'inference_replica_startup_phase_seconds_bucket{le="0.25",phase="download"}')).toBe(0);
      expect(sample(metrics, 'inference_replica_startup_seconds_count{provider="local"}')).toBe(1);
      expect(sample(metrics, 'inference_replica_startup_seconds_sum{provider="local"}')).toBeCloseTo(replica.startupMs! / 1000, 2);
    });
  });

  describe('an agent whose engine never gets ready', () => {
    // Long enough that an agent process always says Hello first, even on a loaded 2-core machine.
    const DEADLINE_MS = 8_000;
    const BACKOFF_BASE_MS = 400;
    let test: TestServer;
    let workspace: TestWorkspace;
    let graphql: ReturnType<typeof graphqlClient>;

    beforeAll(async () => {
      test = await startTestServer({
        controlPlane: {
          capacityIntervalMs: 100, replicaStartDeadlineMs: DEADLINE_MS, replicaStartBackoffBaseMs: BACKOFF_BASE_MS, replicaStartBackoffMaxMs: 60_000,
          localAgentEnv: { WORKER_STARTUP_PHASES_MS: 'download=50,load=hang' },
        },
      });
      workspace = await test.createWorkspace();
      graphql = graphqlClient(test.url, workspace.apiKey);
    });

    afterAll(async () => {
      await test?.stop();
    });

    it('is replaced after the start-up deadline, each time after a longer wait, counted; its phases show it stuck in load', async () => {
      // Every status the deployment takes is pushed, the back-off's included.
      const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
      const reasons: string[] = [];
      const subscription = client.iterate<{ deploymentUpdated: { statusReason: string | null } }>({ query: 'subscription { deploymentUpdated { statusReason } }' });
      const collecting = (async () => {
        for await (const event of subscription) reasons.push(event.data!.deploymentUpdated.statusReason ?? '');
      })().catch(() => {});
      let id: string;
      const view = async (): Promise<DeploymentView> => (await graphql(DEPLOYMENT_QUERY, { id })).data.deployment;
      try {
        await new Promise((resolve) => setTimeout(resolve, 200));
        const created = await graphql(`mutation { createDeployment(input: {modelId: "${CHAT_MODEL}", priceCapPerHour: 1}) { deployment { id } } }`);
        id = created.data.createDeployment.deployment.id;
        await waitFor(async () => {
          const current = await view();
          // Two failures, and the third replica placed after them: two back-offs, the second twice the first.
          return current.replicas.length >= 3 && current.replicas.filter((replica) => replica.startFailure !== null).length >= 2;
        }, 60_000, 'two replicas replaced and a third placed');
      } finally {
        await client.dispose();
        await collecting;
      }
      const holds = reasons.filter((reason) => reason.includes('in a row'));
      const current = await view();
      const failed = current.replicas.filter((replica) => replica.startFailure !== null);
      expect(current.replicaStartFailures).toBe(failed.length);
      expect(current.status).toBe('Creating');
      for (const replica of failed) {
        expect(replica).toMatchObject({ status: 'Terminated', startFailure: 'deadline', startedAt: null, startupMs: null });
        expect(replica.statusReason).toMatch(/^never became ready within 8 s of its placement: stuck in load after \d+(\.\d)? s \(acted out by the CPU engine\); replaced$/);
        expect(replica.startupPhases.map((phase) => [phase.name, phase.done])).toEqual([['provision', true], ['download', true], ['load', false]]);
        // It was given its whole deadline.
        expect(Date.parse(replica.terminatedAt!) - Date.parse(replica.createdAt)).toBeGreaterThanOrEqual(DEADLINE_MS);
      }
      // Each next replica waited out a back-off that doubles with every failure in a row.
      const replicas = [...current.replicas].sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt));
      for (let index = 1; index < replicas.length; index += 1) {
        const waited = Date.parse(replicas[index].createdAt) - Date.parse(replicas[index - 1].terminatedAt!);
        expect(waited).toBeGreaterThanOrEqual(BACKOFF_BASE_MS * 2 ** (index - 1) - 1);
      }
      // While it waits, the deployment says why and when the next try is.
      expect(holds.length).toBeGreaterThanOrEqual(2);
      expect(holds[0]).toMatch(/^0 of 1 replicas placed; (\d+) replica starts? failed in a row \(last: never ready within the start-up deadline\); next try at \d{4}-\d\d-\d\dT[\d:.]+Z, after a [\d.]+ s back-off$/);
      expect(holds[0]).toContain('1 replica start failed in a row');
      expect(holds[0]).toContain('after a 0.4 s back-off');
      expect(holds.some((hold) => hold.includes('2 replica starts failed in a row') && hold.includes('after a 0.8 s back-off'))).toBe(true);

      const metrics = await (await fetch(`${test.url}/metrics`)).text();
      expect(sample(metrics, `inference_replica_start_failures_total{deployment="${id}",reason="deadline"}`)).toBe(failed.length);
      expect(sample(metrics, 'inference_replica_startup_seconds_count{provider="local"}')).toBeUndefined();
    }, 90_000);
  });
});
