import OpenAI from 'openai';
import { waitFor, deploymentForSuite } from '../support/test-server';
import { readCompletionStream } from '../support/chat';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';

/** Client → gateway → gRPC → real agent process (built-in CPU engine), with the official SDK. */
describe('text serving path', () => {
  const served = deploymentForSuite();

  it('answers a chat completion in the standard schema with usage and rate-limit headers', async () => {
    const { data, response } = await served.client.chat.completions
      .create({ model: served.modelId, messages: [{ role: 'user', content: 'Say hello to the platform' }], max_tokens: 12 })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices).toHaveLength(1);
    expect(data.choices[0].message.role).toBe('assistant');
    expect(typeof data.choices[0].message.content).toBe('string');
    expect(data.choices[0].message.content!.length).toBeGreaterThan(0);
    expect(['stop', 'length']).toContain(data.choices[0].finish_reason);
    expect(data.usage!.prompt_tokens).toBeGreaterThan(0);
    expect(data.usage!.completion_tokens).toBeGreaterThan(0);
    expect(data.usage!.completion_tokens).toBeLessThanOrEqual(12);
    expect(data.usage!.total_tokens).toBe(data.usage!.prompt_tokens + data.usage!.completion_tokens);
    expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
    expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
  });

  it('streams chunks ending in [DONE] with the same text as the plain call, and usage when asked', async () => {
    const body = { model: served.modelId, messages: [{ role: 'user' as const, content: 'Tell me about replicas' }], max_tokens: 20, seed: 42 };
    const plain = await served.client.chat.completions.create(body);
    const stream = await served.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe(plain.choices[0].message.content);
    expect(usage).toEqual(plain.usage);
  });

  it('leaves the usage chunk out unless include_usage is set, and still meters the stream', async () => {
    const stream = await served.client.chat.completions.create({ messages: [{ role: 'user', content: 'count me' }], model: served.modelId, stream: true, max_tokens: 5 });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((chunk) => !chunk.usage)).toBe(true);
    const records = served.test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { apiKeyId: served.workspace.apiKeyId, stream: true } })) > 0, 5_000, 'a stream usage record');
    const streamed = await records.find({ where: { apiKeyId: served.workspace.apiKeyId, stream: true } });
    expect(streamed.every((record) => record.totalTokens > 0 && record.status === 'succeeded')).toBe(true);
  });

  it('serves /v1/completions plain and streaming', async () => {
    const completion = await served.client.completions.create({ model: served.modelId, prompt: 'Once upon a time', max_tokens: 8 });
    expect(completion.object).toBe('text_completion');
    expect(completion.choices[0].text.length).toBeGreaterThan(0);
    expect(completion.usage!.completion_tokens).toBeLessThanOrEqual(8);
    const stream = await served.client.completions.create({ model: served.modelId, prompt: 'Once upon a time', max_tokens: 8, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(completion.choices[0].text);
  });

  it('answers a prompt array with n choices per prompt, indexed prompt·n + choice, plain and streamed, usage over all prompts', async () => {
    const prompts = ['Once upon a time', 'The replica said'];
    const body = { model: served.modelId, prompt: prompts, n: 2, max_tokens: 5, seed: 11 };
    const completion = await served.client.completions.create(body);
    expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1, 2, 3]);
    expect(completion.choices.every((choice) => choice.text.length > 0 && choice.finish_reason === 'length')).toBe(true);
    // The CPU engine counts one token per word: 4 + 3 prompt tokens, 4 choices × 5.
    expect(completion.usage).toEqual({ prompt_tokens: 7, completion_tokens: 20, total_tokens: 27 });
    const alone = await served.client.completions.create({ model: served.modelId, prompt: prompts[1], max_tokens: 5, seed: 11 });
    expect(alone.usage!.prompt_tokens).toBe(3);

    const stream = await served.client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const { texts, usage } = await readCompletionStream(stream, 4);
    expect(texts).toEqual(completion.choices.map((choice) => choice.text));
    expect(usage).toEqual(completion.usage);
  });

  it('accepts a request without model and lists and retrieves the endpoint model', async () => {
    const response = await fetch(`${served.deployment.baseUrl}/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'no model field' }] }),
    });
    expect(response.status).toBe(200);
    expect((await response.json()).object).toBe('chat.completion');
    const models = await served.client.models.list();
    expect(models.data.map((model) => model.id)).toEqual([served.modelId]);
    expect((await served.client.models.retrieve(served.modelId)).id).toBe(served.modelId);
  });

  it('says in /v1/models that the built-in CPU engine is a stand-in, and how to get real answers', async () => {
    const standIn = {
      id: served.modelId, object: 'model', owned_by: served.workspace.workspaceId, engine: 'cpu-stand-in',
      note: expect.stringContaining('LOCAL_MODEL_PATH=/path/to/model.gguf npm start'),
    };
    const [listed] = (await served.client.models.list()).data;
    expect(listed).toMatchObject(standIn);
    expect((listed as unknown as { note: string }).note).toMatch(/no model weights and answers with placeholder words/);
    expect(await served.client.models.retrieve(served.modelId)).toMatchObject(standIn);
  });

  it('records usage for every call, with the tokens the client saw', async () => {
    const completion = await served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'meter this one' }], max_tokens: 6, user: 'usage-check' });
    const records = served.test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { apiKeyId: served.workspace.apiKeyId, totalTokens: completion.usage!.total_tokens } })) > 0, 5_000, 'the usage record');
    const record = await records.findOneOrFail({ where: { apiKeyId: served.workspace.apiKeyId, totalTokens: completion.usage!.total_tokens }, order: { id: 'DESC' } });
    expect(record).toMatchObject({ deploymentId: served.deployment.id, endpoint: 'chat.completions', status: 'succeeded', stream: false, promptTokens: completion.usage!.prompt_tokens });
    expect(record.replicaId).toMatch(/^rep_/);
  });

  it('spreads concurrent requests and keeps every response intact', async () => {
    const results = await Promise.all(Array.from({ length: 24 }, (_, index) =>
      served.client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: `parallel ${index}` }], max_tokens: 4, seed: index })));
    expect(results.every((result) => result.choices[0].message.content!.length > 0)).toBe(true);
    expect(new Set(results.map((result) => result.id)).size).toBe(24);
  });
});
