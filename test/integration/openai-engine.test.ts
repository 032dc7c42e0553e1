import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { MOCK_CHOICES_USAGE, startMockEngine } from '../support/mock-engine';
import { startWithDeployment, waitFor, type TestServer } from '../support/test-server';
import { postChat, userChat } from '../support/chat';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';

/** Agents with the `openai` adapter in front of a real HTTP engine (as they would front vLLM). */
describe('openai engine adapter through the platform', () => {
  describe('against the CPU engine served over HTTP', () => {
    let engine: CpuEngineServer;
    let test: TestServer;
    const received: Array<{ path: string; body: Record<string, unknown> }> = [];
    let client: OpenAI;

    beforeAll(async () => {
      engine = await startCpuEngineServer({ onRequest: (path, body) => received.push({ path, body }) });
      ({ test, client } = await startWithDeployment({ controlPlane: { localEngine: 'openai', localEngineUrl: engine.url } }));
    });

    afterAll(async () => {
      await test?.stop();
      await engine?.close();
    });

    it('passes unknown and standard extra fields to the engine untouched', async () => {
      const tools = [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: {} } } }];
      await client.chat.completions.create({
        model: MODEL, messages: [{ role: 'user', content: 'pass these through' }], max_tokens: 4, seed: 11, tools, user: 'u-1',
        // @ts-expect-error fields the SDK does not know must reach the engine too
        repetition_penalty: 1.1, guided_json: { type: 'object' }, vendor_extension: { nested: [1, 2, 3] },
      });
      const body = received.at(-1)!.body;
      expect(received.at(-1)!.path).toBe('/v1/chat/completions');
      expect(body).toMatchObject({ model: MODEL, seed: 11, tools, user: 'u-1', repetition_penalty: 1.1, guided_json: { type: 'object' }, vendor_extension: { nested: [1, 2, 3] }, max_tokens: 4 });
    });

    it('asks the engine for usage on every stream, and hides the usage chunk unless the client asked', async () => {
      const stream = await client.completions.create({ model: MODEL, prompt: 'stream me', max_tokens: 5, stream: true, logit_bias: { '50256': -100 } });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      const body = received.at(-1)!.body;
      expect(received.at(-1)!.path).toBe('/v1/completions');
      expect(body).toMatchObject({ stream: true, stream_options: { include_usage: true }, logit_bias: { '50256': -100 } });
      expect(chunks.length).toBeGreaterThan(0);
      expect(chunks.every((chunk) => !chunk.usage)).toBe(true);
    });

    it('returns the same chat result as the built-in engine would (schema and usage)', async () => {
      const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'check usage' }], max_tokens: 6 });
      expect(completion.object).toBe('chat.completion');
      expect(completion.usage!.total_tokens).toBe(completion.usage!.prompt_tokens + completion.usage!.completion_tokens);
    });
  });

  describe('against a scripted engine', () => {
    let engine: Awaited<ReturnType<typeof startMockEngine>>;
    let test: TestServer;
    let baseUrl: string;
    let apiKey: string;
    let deploymentId: string;

    beforeAll(async () => {
      engine = await startMockEngine();
      ({ test, deployment: { baseUrl, id: deploymentId }, workspace: { apiKey } } = await startWithDeployment({ controlPlane: { localEngine: 'openai', localEngineUrl: engine.url } }));
    });

    afterAll(async () => {
      await test?.stop();
      await engine?.close();
    });

    const post = (content: string, stream = false, signal?: AbortSignal) => postChat(baseUrl, apiKey, userChat(content, { stream }), { signal });

    it('lists the model in /v1/models without the stand-in label: an HTTP engine serves it', async () => {
      const client = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0 });
      const [listed] = (await client.models.list()).data;
      expect(listed).toMatchObject({ id: MODEL, object: 'model' });
      expect(listed).not.toHaveProperty('engine');
      expect(listed).not.toHaveProperty('note');
    });

    it('passes an engine 4xx through with its status and OpenAI error body', async () => {
      const response = await post('#reject this');
      expect(response.status).toBe(400);
      expect((await response.json()).error).toMatchObject({ code: 'context_length_exceeded', param: 'messages' });
    });

    it('maps an engine 5xx to 502 upstream_error', async () => {
      const response = await post('#crash now');
      expect(response.status).toBe(502);
      expect((await response.json()).error.code).toBe('upstream_error');
    });

    it('keeps an engine\'s several choices intact, with their indexes and usage, plain and streamed', async () => {
      const client = new OpenAI({ baseURL: baseUrl, apiKey, maxRetries: 0 });
      const body = { model: MODEL, prompt: ['#choices a', '#choices b'], n: 2 };
      const completion = await client.completions.create(body);
      expect(completion.choices.map((choice) => [choice.index, choice.text])).toEqual([[0, 'choice 0'], [1, 'choice 1'], [2, 'choice 2'], [3, 'choice 3']]);
      expect(completion.usage).toEqual(MOCK_CHOICES_USAGE);
      const stream = await client.completions.create({ ...body, stream: true, stream_options: { include_usage: true } });
      const texts: string[] = [];
      let usage: OpenAI.CompletionUsage | undefined;
      for await (const chunk of stream) {
        for (const choice of chunk.choices) texts[choice.index] = (texts[choice.index] ?? '') + choice.text;
        if (chunk.usage) usage = chunk.usage;
      }
      expect(texts).toEqual(['choice 0', 'choice 1', 'choice 2', 'choice 3']);
      expect(usage).toEqual(MOCK_CHOICES_USAGE);
      expect(engine.requests.at(-1)!.body).toMatchObject({ prompt: ['#choices a', '#choices b'], n: 2 });
    });

    it('cancels the engine call at once when the client disconnects, and meters it as canceled', async () => {
      const before = engine.requests.length;
      const abort = new AbortController();
      const response = await post('#slow stream', true, abort.signal);
      const reader = response.body!.getReader();
      await reader.read();
      await reader.read();
      abort.abort();
      const request = engine.requests[before];
      const startedWaiting = Date.now();
      await request.closedEarly;
      // Far short of the slow stream's own end (it runs 30 s), with room for a loaded machine.
      expect(Date.now() - startedWaiting).toBeLessThan(15_000);
      const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
      await waitFor(async () => (await records.count({ where: { deploymentId, status: 'canceled' } })) === 1, 5_000, 'the canceled usage record');
      // Billed for what it produced before the client left, never as a free request.
      const canceled = await records.findOneByOrFail({ deploymentId, status: 'canceled' });
      expect(canceled.completionTokens).toBeGreaterThanOrEqual(2);
      expect(canceled.totalTokens).toBeGreaterThan(canceled.completionTokens);
    });
  });
});
