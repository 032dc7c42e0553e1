import { spawn, type ChildProcess } from 'node:child_process';
import OpenAI from 'openai';
import { DEFAULT_AGENT_ENTRY } from '../../control-plane/config/control-plane-config';
import { freePort } from '../../control-plane/database/embedded-database';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { FAST_AGENT_ENV, startTestServer, waitFor, serverForSuite, type TestServer } from '../support/test-server';
import { chatOnce, userChat } from '../support/chat';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/** What happens when agents die, clients leave, and the control plane restarts. */
describe('agent failures and reconnects', () => {
  const test = serverForSuite({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });

  it('ends a stream with a terminal error event when its agent is killed, then serves again from the restarted agent', async () => {
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: MODEL, stream: true, max_tokens: 200, messages: [{ role: 'user', content: 'a long answer please' }],
      // @ts-expect-error CPU engine test control, passed through to the engine like any unknown field
      cpu_engine: { tokens_per_second: 50 },
    });
    const replicaId = test.server.controlPlane.dispatcher.connections(deployment.id)[0].replicaId;
    let chunks = 0;
    const error = await (async () => {
      for await (const chunk of stream) {
        if (chunk.choices[0]?.delta?.content) chunks++;
        if (chunks === 3) test.server.controlPlane.localProvider!.processOf(replicaId)!.kill('SIGKILL');
      }
    })().catch((caught) => caught);
    expect(chunks).toBeGreaterThanOrEqual(3);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect(String(error.message)).toMatch(/replica serving this request failed/);

    await test.waitForReplicas(deployment.id, 1);
    const again = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'are you back?' }], max_tokens: 3 });
    expect(again.choices[0].message.content!.length).toBeGreaterThan(0);
    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { deploymentId: deployment.id, status: 'failed' } })) === 1, 5_000, 'the failed usage record');
  });

  it('fails mid-stream engine errors with a final data: {"error": …} event', async () => {
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const response = await fetch(`${deployment.baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'fail soon' }], stream: true, max_tokens: 50, cpu_engine: { fail_after_tokens: 2 } }),
    });
    expect(response.status).toBe(200);
    const events = (await response.text()).split('\n\n').filter(Boolean);
    const last = JSON.parse(events[events.length - 1].replace(/^data: /, ''));
    expect(last.error).toMatchObject({ type: 'api_error', code: 'upstream_error' });
    expect(events.some((event) => event === 'data: [DONE]')).toBe(false);
    expect(events.length).toBeGreaterThan(1);
  });

  it('reconnects an external agent to a restarted control plane, which then serves through it', async () => {
    const grpcPort = await freePort();
    let first: TestServer | null = await startTestServer({ controlPlane: { grpcPort, localAgents: false } });
    const databaseUrl = first.databaseUrl;
    let second: TestServer | null = null;
    let agent: ChildProcess | null = null;
    try {
      const workspace = await first.createWorkspace();
      const { deployment, joinToken } = await first.server.controlPlane.deployments.create(workspace.workspaceId, {
        modelId: MODEL, priceCapPerHour: 1, minReplicas: 1, maxReplicas: 1, autoscale: false, provider: 'external',
      });
      expect(joinToken).toMatch(/^jt-/);
      agent = spawn(process.execPath, [DEFAULT_AGENT_ENTRY], {
        env: { PATH: process.env.PATH, ...FAST_AGENT_ENV, WORKER_CONTROL_PLANE: `127.0.0.1:${grpcPort}`, WORKER_JOIN_TOKEN: joinToken!, WORKER_ENGINE: 'cpu' },
        stdio: 'ignore',
      });
      await first.waitForReplicas(deployment.id, 1);
      const chat = async (server: TestServer) => (await chatOnce(`${server.url}/d/${deployment.slug}/v1`, workspace.apiKey, userChat('hello again', { max_tokens: 3 }))).status;
      expect(await chat(first)).toBe(200);

      await first.stop({ keepDatabase: true });
      first = null;
      second = await startTestServer({ databaseUrl, controlPlane: { grpcPort, localAgents: false } });
      await second.waitForReplicas(deployment.id, 1);
      expect(await chat(second)).toBe(200);
      expect(agent.exitCode).toBeNull();
      const replicas = await second.server.controlPlane.replicas.list(deployment.id);
      expect(replicas).toHaveLength(1);
      expect(replicas[0].status).toBe('Running');
    } finally {
      agent?.kill('SIGKILL');
      await first?.stop({ keepDatabase: true });
      await second?.stop();
      if (!second) await (await import('../support/test-database')).dropTestDatabase(databaseUrl);
    }
  });

  it('refuses an agent with a bad join token, which then exits with code 2', async () => {
    const agent = spawn(process.execPath, [DEFAULT_AGENT_ENTRY], {
      env: { PATH: process.env.PATH, ...FAST_AGENT_ENV, WORKER_CONTROL_PLANE: test.server.controlPlane.grpcAddress, WORKER_JOIN_TOKEN: 'jt-forged', WORKER_ENGINE: 'cpu' },
      stdio: 'ignore',
    });
    const code = await new Promise<number | null>((resolve) => agent.once('exit', resolve));
    expect(code).toBe(2);
  });
});
