import OpenAI from 'openai';
import { startTestServer, waitFor, serverForSuite } from '../support/test-server';
import { postChat, userChat } from '../support/chat';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';

/** RPM from an exact sliding window, TPD from recorded usage; 429 with Retry-After. */
describe('rate limits', () => {
  const test = serverForSuite();

  const chat = (baseUrl: string, apiKey: string) => postChat(baseUrl, apiKey, userChat('rate me', { max_tokens: 4 }));

  it('admits exactly the RPM limit, counts down X-RateLimit-Remaining, then answers 429 with Retry-After', async () => {
    const workspace = await test.createWorkspace({ rpmLimit: 3 });
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const remaining: string[] = [];
    for (let index = 0; index < 3; index++) {
      const response = await chat(deployment.baseUrl, workspace.apiKey);
      expect(response.status).toBe(200);
      remaining.push(response.headers.get('x-ratelimit-remaining')!);
      expect(Number(response.headers.get('x-ratelimit-reset'))).toBeGreaterThanOrEqual(1);
      expect(Number(response.headers.get('x-ratelimit-reset'))).toBeLessThanOrEqual(60);
      await response.arrayBuffer();
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const limited = await chat(deployment.baseUrl, workspace.apiKey);
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    const body = await limited.json();
    expect(body.error).toMatchObject({ type: 'rate_limit_error', code: 'rate_limit_error' });
    expect(body.error.message).toContain('requests per minute');

    const client = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    await expect(client.chat.completions.create({ model: 'meta-llama/Llama-3.1-8B-Instruct', messages: [{ role: 'user', content: 'x' }] }))
      .rejects.toBeInstanceOf(OpenAI.RateLimitError);
  });

  it('keeps limits per key: another key of the same workspace is not affected', async () => {
    const workspace = await test.createWorkspace({ rpmLimit: 1 });
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    expect((await chat(deployment.baseUrl, workspace.apiKey)).status).toBe(200);
    expect((await chat(deployment.baseUrl, workspace.apiKey)).status).toBe(429);
    const { plaintext } = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'second', { rpmLimit: 1 });
    expect((await chat(deployment.baseUrl, plaintext)).status).toBe(200);
  });

  it('refuses once the day\'s recorded tokens reach TPD, also after a restart (read from usage records)', async () => {
    const workspace = await test.createWorkspace({ tpdLimit: 25 });
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    let used = 0;
    let status = 200;
    while (status === 200) {
      const response = await chat(deployment.baseUrl, workspace.apiKey);
      status = response.status;
      if (status === 200) used += (await response.json()).usage.total_tokens;
      else {
        const body = await response.json();
        expect(body.error.message).toContain('tokens per day');
        expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(Number(response.headers.get('retry-after'))).toBeLessThanOrEqual(86_400);
      }
    }
    expect(status).toBe(429);
    expect(used).toBeGreaterThanOrEqual(25);

    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => ((await records.sum('totalTokens', { apiKeyId: workspace.apiKeyId })) ?? 0) >= used, 5_000, 'usage flushed');
    const restarted = await startTestServer({ databaseUrl: test.databaseUrl, controlPlane: { localAgents: false } });
    try {
      const again = await chat(`${restarted.url}/d/${deployment.slug}/v1`, workspace.apiKey);
      expect(again.status).toBe(429);
      expect((await again.json()).error.message).toContain('tokens per day');
    } finally {
      await restarted.stop();
    }
  });

  it('holds TPD under parallel load: 40 parallel max_tokens 500 at TPD 50 serve at most 50 + one prompt', async () => {
    const workspace = await test.createWorkspace({ tpdLimit: 50, rpmLimit: 1_000 });
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'parallel' }], max_tokens: 500 });
    const answers = await Promise.all(Array.from({ length: 40 }, async () => {
      const response = await fetch(`${deployment.baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body,
      });
      return { status: response.status, body: await response.json() };
    }));
    const served = answers.filter((answer) => answer.status === 200);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(served.length + refused.length).toBe(40);
    expect(served.length).toBeGreaterThanOrEqual(1);
    const tokens = served.reduce((sum, answer) => sum + answer.body.usage.total_tokens, 0);
    // A request whose hold passes the day's budget has its completion clamped to what is left (admission.ts clampCompletion).
    expect(tokens).toBeLessThanOrEqual(50 + 20);
    expect(refused.every((answer) => /tokens per day/.test(answer.body.error.message))).toBe(true);
  });

  it('a request that is never run gives its TPD hold back', async () => {
    const workspace = await test.createWorkspace({ tpdLimit: 5_000 });
    // An external deployment with no replica: admitted, then refused at dispatch (503).
    const deployment = await test.createDeployment(workspace, { provider: 'external' });
    for (let index = 0; index < 3; index++) {
      const response = await fetch(`${deployment.baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: 4_000 }),
      });
      expect({ status: response.status, code: (await response.json()).error.code }).toEqual({ status: 503, code: 'no_replica_available' });
    }
    const key = (await test.server.controlPlane.apiKeys.authenticate(workspace.apiKey))!;
    expect((await test.server.controlPlane.rateLimiter.admit(key)).remainingTokens).toBe(5_000);
  });
});
