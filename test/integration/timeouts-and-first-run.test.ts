import OpenAI from 'openai';
import { DeploymentEngines } from '../../control-plane/replicas/deployment-engines';
import { ensureFirstRun } from '../../control-plane/workspaces/first-run';
import { firstRunBanner } from '../../gateway/first-run-banner';
import { standInDeployments } from '../../gateway/stand-in-engine';
import { waitFor, serverForSuite } from '../support/test-server';
import { postChat, userChat } from '../support/chat';

describe('request timeout (REQUEST_TIMEOUT_MS, 120 s by default)', () => {
  // 2 s, not less: the stream below must get its headers and first chunks out within the budget on a loaded machine.
  const test = serverForSuite({ gateway: { requestTimeoutMs: 2_000 }, controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });

  const call = async (baseUrl: string, apiKey: string, body: Record<string, unknown>) => postChat(baseUrl, apiKey, userChat('slow', body));

  it('answers 504 gateway_timeout when nothing came back in time, and the agent lets go of the job', async () => {
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const started = Date.now();
    const response = await call(deployment.baseUrl, workspace.apiKey, { cpu_engine: { ttft_ms: 60_000 } });
    expect(response.status).toBe(504);
    expect((await response.json()).error.code).toBe('gateway_timeout');
    // At the budget, far short of the engine's 60 s first token (room for a loaded machine).
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    expect(Date.now() - started).toBeLessThan(20_000);
    const connection = test.server.controlPlane.dispatcher.connections(deployment.id)[0];
    await waitFor(() => connection.inFlight === 0, 10_000, 'the job to leave the replica');
  });

  it('ends a stream that runs past the budget with a terminal error event', async () => {
    const workspace = await test.createWorkspace();
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const response = await call(deployment.baseUrl, workspace.apiKey, { stream: true, max_tokens: 500, cpu_engine: { tokens_per_second: 20 } });
    expect(response.status).toBe(200);
    const events = (await response.text()).split('\n\n').filter(Boolean);
    expect(events.length).toBeGreaterThan(2);
    expect(JSON.parse(events.at(-1)!.slice('data: '.length)).error.code).toBe('gateway_timeout');
  });
});

describe('first run', () => {
  const test = serverForSuite();

  it('creates a dev workspace, key and deployment once; the printed URL and key work with the SDK; both banners say the CPU engine is a stand-in', async () => {
    const engines = new DeploymentEngines(test.server.controlPlane.replicas, test.server.controlPlane.localProvider);
    const first = await ensureFirstRun(test.server.controlPlane);
    if (!first.created) throw new Error('expected a first run');
    // Printed at once, before the replica's agent has said Hello: its engine is the one it is started with.
    const standIn = await standInDeployments(engines, [first.deployment]);
    const banner = firstRunBanner(first, (slug) => `${test.url}/d/${slug}/v1`, `${test.url}/graphql`, (deployment) => standIn.has(deployment.id));
    expect(banner).toContain('This deployment is a stand-in');
    expect(banner).toContain('LOCAL_MODEL_PATH=/path/to/model.gguf npm start');
    const apiKey = /API key:\s+(mk-\S+)/.exec(banner)![1];
    const baseUrl = /Base URL:\s+(\S+)/.exec(banner)![1];
    const model = /model: '([^']+)'/.exec(banner)![1];
    expect(banner).toContain(`curl ${baseUrl}/chat/completions`);
    await test.waitForReplicas(first.deployment.id, 1);
    const client = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Hello!' }] });
    expect(completion.choices[0].message.content!.length).toBeGreaterThan(0);

    const second = await ensureFirstRun(test.server.controlPlane);
    expect(second.created).toBe(false);
    if (second.created) throw new Error('expected a later start');
    const standInLater = await standInDeployments(engines, second.deployments);
    const again = firstRunBanner(second, (slug) => `${test.url}/d/${slug}/v1`, `${test.url}/graphql`, (deployment) => standInLater.has(deployment.id));
    expect(again).not.toMatch(/mk-/);
    expect(again).toContain(`${baseUrl}  (built-in CPU stand-in)`);
    expect(again).toContain('LOCAL_MODEL_PATH=/path/to/model.gguf npm start');
    expect(await test.server.controlPlane.workspaces.count()).toBe(1);
  });
});
