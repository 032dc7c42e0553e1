import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { DEFAULT_AGENT_ENTRY } from '../../control-plane/config/control-plane-config';
import { FAST_AGENT_ENV, startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlClient, OPERATOR_TOKEN } from './support/graphql-client';

/** Operator-registered hosts: the host's own agent becomes the replica placement assigns to it. */
describe('static provider', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let graphql: ReturnType<typeof graphqlClient>;
  let operator: ReturnType<typeof graphqlClient>;
  let agent: ChildProcess | null = null;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, capacityIntervalMs: 100 } });
    workspace = await test.createWorkspace();
    graphql = graphqlClient(test.url, workspace.apiKey);
    operator = graphqlClient(test.url, OPERATOR_TOKEN);
  });

  afterAll(async () => {
    agent?.kill('SIGKILL');
    await test?.stop();
  });

  it('registers a host, runs a replica on it at the host\'s price through its own agent, streams its load, and replaces it when the host is removed', async () => {
    const registered = await operator(`mutation { registerStaticHost(input: {name: "rack-7", gpuName: "A10", gpuMemoryGb: 24, region: "on-prem", pricePerHour: 0.5}) {
      host { id name replicaId } hostToken } }`);
    const { host, hostToken } = registered.data.registerStaticHost;
    expect(hostToken).toMatch(/^ht-/);
    expect((await graphql('{ gpuOffers(provider: "static") { id gpuName pricePerHour available } }')).data.gpuOffers)
      .toEqual([{ id: `static:${host.id}`, gpuName: 'A10', pricePerHour: 0.5, available: 1 }]);

    // The host's agent starts before any replica is assigned: it is told host_idle and retries.
    agent = spawn(process.execPath, [DEFAULT_AGENT_ENTRY], {
      env: { PATH: process.env.PATH, ...FAST_AGENT_ENV, WORKER_CONTROL_PLANE: test.server.controlPlane.grpcAddress, WORKER_JOIN_TOKEN: hostToken, WORKER_ENGINE: 'cpu' },
      stdio: 'ignore',
    });
    const created = await graphql('mutation { createDeployment(input: {modelId: "meta-llama/Llama-3.1-8B-Instruct", priceCapPerHour: 1, provider: "static"}) { deployment { id baseUrl } } }');
    const { id, baseUrl } = created.data.createDeployment.deployment;
    await test.waitForReplicas(id, 1);
    const deployment = async () => (await graphql(`query($id: ID!) { deployment(id: $id) { status statusReason replicas { id status offerId gpuName pricePerHour } } }`, { id })).data.deployment;
    expect((await deployment()).replicas[0]).toMatchObject({ status: 'Running', offerId: `static:${host.id}`, gpuName: 'A10', pricePerHour: 0.5 });

    const ws = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
    const loads: any[] = [];
    const subscription = ws.iterate<{ replicaLoad: any }>({ query: 'subscription($id: ID!) { replicaLoad(deploymentId: $id) { replicaId inFlight queued engineHealth } }', variables: { id } });
    const collecting = (async () => {
      for await (const event of subscription) loads.push(event.data!.replicaLoad);
    })().catch(() => {});
    try {
      const chat = await fetch(`${baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hello rack' }], max_tokens: 3 }),
      });
      expect(chat.status).toBe(200);
      await waitFor(() => loads.length > 0, 5_000, 'a load report');
      expect(loads[0]).toMatchObject({ engineHealth: 'ENGINE_HEALTH_HEALTHY', queued: 0 });
    } finally {
      await subscription.return?.();
      await ws.dispose();
      await collecting;
    }

    await operator(`mutation($id: ID!) { removeStaticHost(id: $id) { id } }`, { id: host.id });
    await waitFor(async () => (await deployment()).statusReason?.includes('waiting for capacity') ?? false, 10_000, 'the replacement to wait for capacity');
    expect((await deployment()).replicas[0].status).toBe('Terminated');
    // Its agent was told to drain: it leaves (a supervisor would start it again, idle).
    await waitFor(() => agent!.exitCode !== null, 10_000, 'the host agent to drain and exit');
    expect(agent!.exitCode).toBe(0);
  });
});

/**
 * Static hosts' weights caches: an idle host's agent names in its Hello what its cache holds,
 * and placement puts a replica of that model on such a host (at the same price as the others).
 */
describe('static hosts that hold the model\'s weights', () => {
  let test: TestServer;
  let graphql: ReturnType<typeof graphqlClient>;
  let operator: ReturnType<typeof graphqlClient>;
  const agents: ChildProcess[] = [];
  const cacheDirs: string[] = [];

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { operatorToken: OPERATOR_TOKEN, capacityIntervalMs: 100 } });
    graphql = graphqlClient(test.url, (await test.createWorkspace()).apiKey);
    operator = graphqlClient(test.url, OPERATOR_TOKEN);
  });

  afterAll(async () => {
    for (const agent of agents) agent.kill('SIGKILL');
    await test?.stop();
    for (const directory of cacheDirs) fs.rmSync(directory, { recursive: true, force: true });
  });

  it('a host whose cache holds the model wins over one that must download it, at the same price', async () => {
    const hosts: Array<{ id: string; name: string; hostToken: string }> = [];
    for (const name of ['rack-a', 'rack-b']) {
      const registered = await operator(`mutation($name: String!) { registerStaticHost(input: {name: $name, gpuName: "L40S", gpuMemoryGb: 48, region: "on-prem", pricePerHour: 1}) {
        host { id name } hostToken } }`, { name });
      hosts.push({ ...registered.data.registerStaticHost.host, hostToken: registered.data.registerStaticHost.hostToken });
    }
    // Same price, same memory, one machine each: without the cache, the first by id would win.
    // The other one's cache holds the model, as vLLM leaves it with HF_HOME there.
    const [plain, cached] = [...hosts].sort((left, right) => `static:${left.id}`.localeCompare(`static:${right.id}`));
    for (const host of hosts) {
      const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), `static-cache-${host.name}-`));
      cacheDirs.push(cacheDir);
      if (host === cached) fs.mkdirSync(path.join(cacheDir, 'hub', 'models--meta-llama--Llama-3.1-8B-Instruct', 'snapshots', '0e9e39f'), { recursive: true });
      agents.push(spawn(process.execPath, [DEFAULT_AGENT_ENTRY], {
        env: {
          PATH: process.env.PATH, ...FAST_AGENT_ENV, WORKER_CONTROL_PLANE: test.server.controlPlane.grpcAddress, WORKER_JOIN_TOKEN: host.hostToken,
          WORKER_ENGINE: 'cpu', WORKER_MODEL_CACHE_DIR: cacheDir,
        },
        stdio: 'ignore',
      }));
    }
    // The idle hosts' agents are told host_idle, but their Hellos are heard.
    const listed = async () => (await operator('{ staticHosts { id name cachedModels } }')).data.staticHosts as Array<{ id: string; name: string; cachedModels: string[] }>;
    await waitFor(async () => (await listed()).find((host) => host.id === cached.id)?.cachedModels.length === 1, 20_000, 'the cache reported');
    expect(Object.fromEntries((await listed()).map((host) => [host.id, host.cachedModels]))).toEqual({ [plain.id]: [], [cached.id]: ['meta-llama/Llama-3.1-8B-Instruct'] });
    const created = await graphql('mutation { createDeployment(input: {modelId: "meta-llama/Llama-3.1-8B-Instruct", priceCapPerHour: 2, provider: "static"}) { deployment { id } } }');
    const { id } = created.data.createDeployment.deployment;
    await test.waitForReplicas(id, 1);
    const replicas = (await graphql(`query($id: ID!) { deployment(id: $id) { replicas { status offerId } } }`, { id })).data.deployment.replicas;
    expect(replicas).toEqual([{ status: 'Running', offerId: `static:${cached.id}` }]);
  });
});
