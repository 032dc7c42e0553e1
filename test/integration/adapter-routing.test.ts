import type { DispatchRequest, JobFailure, JobListener } from '../../control-plane/dispatch/job';
import { adapterHome } from '../../control-plane/placement/adapter-home';
import type { AdapterRef } from '../../proto/worker/v1';
import { FakeWorkerAgent } from '../support/fake-worker-agent';
import { dropTestDatabase } from '../support/test-database';
import { startTestServer, waitFor, type TestServer } from '../support/test-server';
import { parsePrometheusText, sampleValue } from '../telemetry/support/prometheus-text';

/**
 * Residency-aware routing of adapter jobs across two servers (docs/routing.md, "Adapter jobs"):
 * four replicas of one external deployment, two agents on each server (test-side gRPC clients
 * speaking worker.v1), one of them without adapter slots. Agents report which adapters they
 * hold on their heartbeats; each server's router sends an adapter job to the replica holding
 * it, here or relayed to the other server with the replica's id, and both send an adapter held
 * nowhere to the same home. The replica without slots never gets an adapter job.
 */
describe('adapter routing across servers', () => {
  let serverA: TestServer;
  let serverB: TestServer;
  let databaseUrl: string;
  let deploymentId: string;
  const agents: FakeWorkerAgent[] = [];
  const cluster = { clusterHeartbeatIntervalMs: 100, clusterServerTimeoutMs: 2_000, localAgents: false };

  const ref = (name: string): AdapterRef => ({
    name, displayName: `bot-${name}`, format: 'ADAPTER_FORMAT_PEFT_TAR', source: 'https://storage.invalid/adapter.tar', sha256: 'ab'.repeat(32), sizeBytes: 1024, rank: 8, scale: 1,
  } as AdapterRef);

  /** Dispatches one adapter job through the server's router and waits for its answer; the replica that ran it. */
  async function run(server: TestServer, adapter: string): Promise<string> {
    const request: DispatchRequest = {
      deploymentId, kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from('{"messages":[{"role":"user","content":"hi"}]}'), stream: false,
      includeUsage: false, model: `bot-${adapter}`, deadlineUnixMs: 0, adapter: ref(adapter),
    };
    let done!: (failure: JobFailure | null) => void;
    const finished = new Promise<JobFailure | null>((resolve) => (done = resolve));
    const listener: JobListener = { onChunk() {}, onOutput() {}, onCompleted: () => done(null), onFailed: (failure) => done(failure) };
    const job = server.server.controlPlane.jobs.dispatch(request, listener, { policy: 'prefix-aware', fields: { messages: [{ role: 'user', content: 'hi' }] }, tenant: 'ws_test' });
    expect(await finished).toBeNull();
    return job.replicaId;
  }

  const agentOf = (replicaId: string) => agents.find((agent) => agent.replicaId === replicaId)!;

  beforeAll(async () => {
    serverA = await startTestServer({ controlPlane: cluster });
    databaseUrl = serverA.databaseUrl;
    serverB = await startTestServer({ databaseUrl, controlPlane: cluster });
    const workspace = await serverA.createWorkspace();
    const { deployment, joinToken } = await serverA.server.controlPlane.deployments.create(workspace.workspaceId, {
      modelId: serverA.server.controlPlane.catalog.defaultChatModel().id, priceCapPerHour: 4, minReplicas: 4, maxReplicas: 4, autoscale: false, provider: 'external',
    });
    deploymentId = deployment.id;
    const join = (server: TestServer, id: string, maxLoras: number) => new FakeWorkerAgent(server.server.controlPlane.grpcAddress, joinToken!, id, { maxLoras }).joined();
    agents.push(await join(serverA, 'agt_a1', 4), await join(serverA, 'agt_a_none', 0), await join(serverB, 'agt_b1', 4), await join(serverB, 'agt_b2', 4));
    await serverA.waitForReplicas(deploymentId, 2);
    await serverB.waitForReplicas(deploymentId, 2);
  });

  afterAll(async () => {
    for (const agent of agents) agent.stop();
    await serverB?.stop();
    await serverA?.stop({ keepDatabase: true });
    await dropTestDatabase(databaseUrl);
  });

  it('sends each adapter job to the replica holding the adapter, on either server, and a miss to one home', async () => {
    const [a1, aNone, b1, b2] = agents;
    a1.hold([{ name: 'ad_y.r1', state: 'ADAPTER_STATE_GPU' }]);
    b2.hold([{ name: 'ad_x.r1', state: 'ADAPTER_STATE_GPU' }, { name: 'ad_w.r2', state: 'ADAPTER_STATE_LOADING' }]);
    // Each server learns the other's residency from its next registry heartbeat.
    const sees = (server: TestServer, name: string) => server.server.controlPlane.registry.peers()
      .some((peer) => peer.load[deploymentId]?.replicas?.some((replica) => replica.adapters?.gpu.includes(name)));
    await waitFor(() => sees(serverA, 'ad_x.r1') && sees(serverB, 'ad_y.r1'), 5_000, 'both servers see the other\'s residency');

    expect(await run(serverA, 'ad_x.r1')).toBe(b2.replicaId);
    expect(await run(serverA, 'ad_y.r1')).toBe(a1.replicaId);
    expect(await run(serverB, 'ad_y.r1')).toBe(a1.replicaId);
    expect(await run(serverB, 'ad_x.r1')).toBe(b2.replicaId);
    expect(await run(serverA, 'ad_w.r2')).toBe(b2.replicaId);
    // The relayed Assign carried the adapter as the control plane named it.
    expect(b2.assigns.find((assign) => assign.adapter?.name === 'ad_x.r1')?.adapter).toMatchObject({ displayName: 'bot-ad_x.r1', rank: 8, format: 'ADAPTER_FORMAT_PEFT_TAR' });

    // Held nowhere: both servers send it to the same home among the replicas with slots.
    const home = adapterHome([a1, b1, b2].map((agent) => ({ replicaId: agent.replicaId })), 'ad_z.r1')!.replicaId;
    expect(await run(serverA, 'ad_z.r1')).toBe(home);
    expect(await run(serverB, 'ad_z.r1')).toBe(home);
    expect(aNone.assigns).toHaveLength(0);

    const metrics = parsePrometheusText(await (await fetch(`${serverA.url}/metrics`)).text());
    const decisions = (reason: string) => sampleValue(metrics, 'inference_routing_decisions_total', { deployment: deploymentId, policy: 'prefix-aware', reason }) ?? 0;
    expect(decisions('adapter_resident')).toBe(2);
    expect(decisions('adapter_loading')).toBe(1);
    expect(decisions('adapter_home')).toBe(1);
  });
});
