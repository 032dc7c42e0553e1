import OpenAI from 'openai';
import { serverForSuite } from '../support/test-server';

/**
 * One request cannot take a key's day far past its TPD (issue 33: TPD 50 served 64,001 tokens in
 * one call): a request whose worst case passes what is left has its completion bound clamped to
 * it (docs/tenant-budget.md: "TPD: clamped, not refused"), with the official SDK as the client.
 */
describe('TPD: the worst case of one request', () => {
  const test = serverForSuite();

  /** The SDK on a ready deployment of a new workspace whose key may use `tpdLimit` tokens a day. */
  async function clientWithTpd(tpdLimit: number): Promise<OpenAI> {
    const workspace = await test.createWorkspace({ tpdLimit });
    const deployment = await test.createDeployment(workspace);
    await test.waitForReplicas(deployment.id, 1);
    return new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
  }

  it('max_tokens 64,000 at TPD 50 is clamped to what the day has left: at most 50 completion tokens, finish_reason length, then 429', async () => {
    const client = await clientWithTpd(50);
    const answer = await client.chat.completions.create({ model: test.server.controlPlane.catalog.defaultChatModel().id, messages: [{ role: 'user', content: 'hi' }], max_tokens: 64_000 });
    expect(answer.usage!.completion_tokens).toBeGreaterThan(0);
    expect(answer.usage!.completion_tokens).toBeLessThanOrEqual(50);
    expect(answer.choices[0].finish_reason).toBe('length');
    // The day is spent: the next call is refused before it runs.
    await expect(client.chat.completions.create({ messages: [{ role: 'user', content: 'again' }], max_tokens: 5, model: test.server.controlPlane.catalog.defaultChatModel().id }))
      .rejects.toMatchObject({ status: 429 });
  });

  it('a request that fits what is left is not touched', async () => {
    const client = await clientWithTpd(100_000);
    const answer = await client.chat.completions.create({ model: test.server.controlPlane.catalog.defaultChatModel().id, messages: [{ role: 'user', content: 'hi' }], max_tokens: 30 });
    expect(answer.usage!.completion_tokens).toBe(30);
  });
});
