import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { waitFor } from '../support/test-server';
import { readCompletionStream } from '../support/chat';
import { llamaDeploymentForSuite } from './support/llama-deployment';
import { chatPromptTokens } from './support/tiny-model';

const PARALLEL = 2;
const CONTEXT_SIZE = 4096;

/**
 * Client → gateway → gRPC → agent process → llama.cpp, with the official SDK, on a tiny GGUF
 * model written at test time (byte-level tokenizer: one token per byte, so usage is checkable).
 */
describe('llama.cpp serving path', () => {
  const served = llamaDeploymentForSuite('tiny-chat.gguf', { contextSize: CONTEXT_SIZE, parallel: PARALLEL });

  const ask = (content: string) => [{ role: 'user' as const, content }];

  it('registers the file as a local chat model served by llama-cpp replicas', async () => {
    expect(served.modelId).toBe('local/tiny-chat');
    expect(served.test.server.controlPlane.catalog.localModel()).toMatchObject({ engine: 'llama-cpp', task: 'chat', source: { kind: 'gguf', path: `${served.models.directory}/tiny-chat.gguf` } });
    const [replica] = await served.test.server.controlPlane.replicas.list(served.deployment.id);
    expect(replica).toMatchObject({ status: 'Running', engineKind: 'llama-cpp', maxConcurrency: PARALLEL, gpus: [] });
  });

  it('lists its model in /v1/models without the stand-in label: llama.cpp serves real weights', async () => {
    const [listed] = (await served.client.models.list()).data;
    expect(listed).toEqual({ id: served.modelId, object: 'model', created: expect.any(Number), owned_by: served.workspace.workspaceId });
    expect(await served.client.models.retrieve(served.modelId)).toEqual(listed);
  });

  it('answers a chat completion with usage equal to the tokenizer\'s counts', async () => {
    const messages = [{ role: 'system' as const, content: 'You are terse.' }, ...ask('Hello, tiny model!')];
    const completion = await served.client.chat.completions.create({ model: served.modelId, messages, max_tokens: 24 });
    expect(completion).toMatchObject({ object: 'chat.completion', model: served.modelId, choices: [{ index: 0, finish_reason: 'length', message: { role: 'assistant' } }] });
    const text = completion.choices[0].message.content!;
    // Every generated token is one printable byte of the answer.
    expect(text).toMatch(/^[\x20-\x7e]{24}$/);
    expect(completion.usage).toMatchObject({ prompt_tokens: chatPromptTokens(messages), completion_tokens: 24, total_tokens: chatPromptTokens(messages) + 24 });
  });

  it('streams token by token: the same text and usage as the plain call under the same seed', async () => {
    const body = { model: served.modelId, messages: ask('Tell me about replicas'), max_tokens: 30, seed: 1234 };
    const plain = await served.client.chat.completions.create(body);
    const stream = await served.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const pieces: string[] = [];
    let usage: OpenAI.CompletionUsage | null | undefined;
    let finishReason: string | null = null;
    for await (const chunk of stream) {
      expect(chunk.object).toBe('chat.completion.chunk');
      const piece = chunk.choices[0]?.delta?.content;
      if (piece) pieces.push(piece);
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(pieces).toHaveLength(30);
    expect(pieces.join('')).toBe(plain.choices[0].message.content);
    expect(finishReason).toBe('length');
    // The same counts; the stream reused the prompt the plain call left in its sequence.
    const { prompt_tokens_details: _details, ...counts } = plain.usage!;
    expect(usage).toMatchObject(counts);
  });

  it('serves /v1/completions plain and streamed, prompt tokens counted from the text', async () => {
    const prompt = 'Once upon a time';
    const completion = await served.client.completions.create({ model: served.modelId, prompt, max_tokens: 10, seed: 7 });
    expect(completion.object).toBe('text_completion');
    expect(completion.choices[0].text).toHaveLength(10);
    expect(completion.usage).toMatchObject({ prompt_tokens: prompt.length, completion_tokens: 10, total_tokens: prompt.length + 10 });
    const stream = await served.client.completions.create({ model: served.modelId, prompt, max_tokens: 10, seed: 7, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(completion.choices[0].text);
    const echoed = await served.client.completions.create({ model: served.modelId, prompt, max_tokens: 10, seed: 7, echo: true });
    expect(echoed.choices[0].text).toBe(prompt + completion.choices[0].text);
    const defaulted = await served.client.completions.create({ model: served.modelId, prompt });
    expect(defaulted.usage!.completion_tokens).toBe(16);
  });

  it('is deterministic under a seed, and greedy at temperature 0', async () => {
    const run = async (extra: Record<string, unknown>) =>
      (await served.client.chat.completions.create({ model: served.modelId, messages: ask('Pick a word'), max_tokens: 20, temperature: 1, ...extra })).choices[0].message.content;
    const first = await run({ seed: 42 });
    expect(await run({ seed: 42 })).toBe(first);
    expect(await run({ seed: 43 })).not.toBe(first);
    const greedy = await run({ temperature: 0, seed: 1 });
    expect(await run({ temperature: 0, seed: 2 })).toBe(greedy);
    const completionText = async () => (await served.client.completions.create({ model: served.modelId, prompt: 'abc', max_tokens: 12, seed: 99, top_p: 0.9 })).choices[0].text;
    expect(await completionText()).toBe(await completionText());
  });

  it('honours max_tokens and max_completion_tokens', async () => {
    const short = await served.client.chat.completions.create({ model: served.modelId, messages: ask('a'), max_tokens: 1 });
    expect(short.usage!.completion_tokens).toBe(1);
    expect(short.choices[0].finish_reason).toBe('length');
    const newer = await served.client.chat.completions.create({ model: served.modelId, messages: ask('a'), max_completion_tokens: 3 });
    expect(newer.usage!.completion_tokens).toBe(3);
  });

  it('honours stop: the answer ends right before the stop sequence, plain and streamed', async () => {
    const body = { model: served.modelId, messages: ask('Say something long'), max_tokens: 60, temperature: 0 };
    const full = (await served.client.chat.completions.create(body)).choices[0].message.content!;
    const stop = full.slice(20, 23);
    const cut = full.indexOf(stop);
    const stopped = await served.client.chat.completions.create({ ...body, stop: ['\u0000never', stop] });
    expect(stopped.choices[0]).toMatchObject({ finish_reason: 'stop', message: { content: full.slice(0, cut) } });
    // The stop sequence's tokens were generated (and are billed), though never shown.
    expect(stopped.usage!.completion_tokens).toBe(cut + stop.length);
    const stream = await served.client.chat.completions.create({ ...body, stop, stream: true });
    let text = '';
    let finishReason: string | null = null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finishReason = chunk.choices[0]?.finish_reason ?? finishReason;
    }
    expect(text).toBe(full.slice(0, cut));
    expect(finishReason).toBe('stop');
  });

  it('generates n choices in parallel, each with its own seed, the prompt counted once', async () => {
    const messages = ask('Two answers please');
    const completion = await served.client.chat.completions.create({ model: served.modelId, messages, max_tokens: 8, n: 2, seed: 5 });
    expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1]);
    expect(completion.choices[0].message.content).not.toBe(completion.choices[1].message.content);
    expect(completion.usage).toMatchObject({ prompt_tokens: chatPromptTokens(messages), completion_tokens: 16 });
    const stream = await served.client.chat.completions.create({ model: served.modelId, messages, max_tokens: 8, n: 2, seed: 5, stream: true });
    const texts = ['', ''];
    for await (const chunk of stream) for (const choice of chunk.choices) texts[choice.index] += choice.delta?.content ?? '';
    expect(texts).toEqual(completion.choices.map((choice) => choice.message.content));
  });

  it('answers a prompt array with one choice per prompt, in prompt order, plain and streamed, prompt tokens summed', async () => {
    const prompts = ['Once upon a time', 'Hi'];
    const body = { model: served.modelId, prompt: prompts, max_tokens: 6, seed: 9 };
    const completion = await served.client.completions.create(body);
    expect(completion.choices.map((choice) => choice.index)).toEqual([0, 1]);
    expect(completion.choices.every((choice) => choice.text.length === 6)).toBe(true);
    // One token per byte: each prompt counted once.
    const promptTokens = prompts[0].length + prompts[1].length;
    expect(completion.usage).toMatchObject({ prompt_tokens: promptTokens, completion_tokens: 12, total_tokens: promptTokens + 12 });
    const stream = await served.client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
    const { texts, usage } = await readCompletionStream(stream, 2);
    expect(texts).toEqual(completion.choices.map((choice) => choice.text));
    expect(usage).toEqual(completion.usage);
  });

  it('maps presence/frequency penalties and logit_bias onto llama.cpp\'s samplers', async () => {
    const body = { model: served.modelId, messages: ask('Repeat yourself'), max_tokens: 40, temperature: 0 };
    const plain = (await served.client.chat.completions.create(body)).choices[0].message.content!;
    const penalised = (await served.client.chat.completions.create({ ...body, presence_penalty: 2, frequency_penalty: 2 })).choices[0].message.content!;
    expect(penalised).not.toBe(plain);
    expect(new Set(penalised).size).toBeGreaterThan(new Set(plain).size);
    const biased = await served.client.chat.completions.create({ ...body, max_tokens: 5, logit_bias: { 65: 100 } });
    expect(biased.choices[0].message.content).toBe('AAAAA');
  });

  it('refuses what llama.cpp cannot do with a 400 that names the field', async () => {
    const refused = async (extra: Record<string, unknown>, param: string, code?: string) => {
      const response = await fetch(`${served.deployment.baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: ask('x'), max_tokens: 2, ...extra }),
      });
      expect(response.status).toBe(400);
      const { error } = await response.json();
      expect(error).toMatchObject({ type: 'invalid_request_error', param, ...(code ? { code } : {}) });
      return error.message as string;
    };
    expect(await refused({ logprobs: true }, 'logprobs', 'unsupported_parameter')).toContain('not supported by the llama-cpp engine');
    await refused({ functions: [{ name: 'f', parameters: {} }] }, 'functions', 'unsupported_parameter');
    await refused({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } } }, 'response_format.json_schema.schema.pattern', 'unsupported_parameter');
    await refused({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }, 'messages[0].content[0]', 'unsupported_parameter');
    expect(await refused({ n: PARALLEL + 1 }, 'n')).toContain(`at most ${PARALLEL} choices`);
    expect(await refused({ max_tokens: CONTEXT_SIZE }, 'messages', 'context_length_exceeded')).toContain(`maximum context length is ${CONTEXT_SIZE} tokens`);
    await refused({ temperature: 3 }, 'temperature');
    await refused({ presence_penalty: -3 }, 'presence_penalty');
  });

  it('cancels the generation when the client disconnects: metered as canceled, its sequence free at once', async () => {
    const controller = new AbortController();
    const requestedAt = Date.now();
    const stream = await served.client.chat.completions.create(
      { model: served.modelId, messages: ask('Go on forever'), max_tokens: 3500, stream: true },
      { signal: controller.signal },
    );
    let chunks = 0;
    let abortedAt = 0;
    for await (const _chunk of stream) {
      if (++chunks < 5) continue;
      abortedAt = Date.now();
      controller.abort();
      break;
    }
    const records = served.test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { deploymentId: served.deployment.id, status: 'canceled' } })) > 0, 5_000, 'the canceled record');
    const [record] = await records.find({ where: { deploymentId: served.deployment.id, status: 'canceled' } });
    expect(record.completionTokens).toBeGreaterThanOrEqual(4);
    expect(record.completionTokens).toBeLessThan(1_000);
    // Both sequences free: a request that needs both starts at once, long before the canceled one
    // could have run out its 3500 tokens at the pace it had (on this machine, loaded or not).
    const startedAt = Date.now();
    const both = await served.client.chat.completions.create({ model: served.modelId, messages: ask('both'), max_tokens: 4, n: PARALLEL });
    expect(both.usage!.completion_tokens).toBe(4 * PARALLEL);
    const msPerToken = (abortedAt - requestedAt) / record.completionTokens;
    expect(Date.now() - startedAt).toBeLessThan(((3500 - record.completionTokens) * msPerToken) / 2);
  });

  it('charges TPD limits from the real token usage', async () => {
    const { apiKey, plaintext } = await served.test.server.controlPlane.apiKeys.create(served.workspace.workspaceId, 'limited', { tpdLimit: 100 });
    const limited = { apiKeyId: apiKey.id };
    const limitedClient = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: plaintext, maxRetries: 0 });
    const messages = ask('count my tokens');
    const first = await limitedClient.chat.completions.create({ model: served.modelId, messages, max_tokens: 20 });
    expect(first.usage!.total_tokens).toBe(chatPromptTokens(messages) + 20);
    const records = served.test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => ((await records.sum('totalTokens', { apiKeyId: limited.apiKeyId })) ?? 0) === first.usage!.total_tokens, 5_000, 'usage flushed');
    const { data: second, response } = await limitedClient.chat.completions.create({ model: served.modelId, messages, max_tokens: 60 }).withResponse();
    // Remaining after admission counts the day's usage and what this request may still use (its
    // hold: body bytes + max_tokens), which is settled to its real usage when it ends.
    expect(Number(response.headers.get('x-ratelimit-remaining-tokens'))).toBe(Math.max(0, 100 - first.usage!.total_tokens - 60 - Buffer.byteLength(JSON.stringify({ model: served.modelId, messages, max_tokens: 60 }))));
    await waitFor(async () => ((await records.sum('totalTokens', { apiKeyId: limited.apiKeyId })) ?? 0) === first.usage!.total_tokens + second.usage!.total_tokens, 5_000, 'usage flushed');
    const refused = await limitedClient.chat.completions.create({ model: served.modelId, messages, max_tokens: 1 }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect((refused as InstanceType<typeof OpenAI.RateLimitError>).message).toContain('tokens per day');
  });
});
