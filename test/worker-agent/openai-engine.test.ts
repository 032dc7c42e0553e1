import { JobCancellation } from '../../worker-agent/job-cancellation';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { OpenAiEngine, type OpenAiEngineOptions } from '../../worker-agent/engines/openai-engine';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { engineJob, runEngine, sseEvents, streamedText } from './support/engine-harness';

const messages = [{ role: 'user', content: 'Tell me about agents.' }];
const disposables: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

interface Seen { path: string; body: Record<string, any> }

async function cpuServer(options: Parameters<typeof startCpuEngineServer>[0] = {}): Promise<{ server: CpuEngineServer; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = await startCpuEngineServer({ ...options, onRequest: (path, body) => seen.push({ path, body }) });
  disposables.push(() => server.close());
  return { server, seen };
}

async function openAiEngine(url: string, overrides: Partial<OpenAiEngineOptions> = {}): Promise<OpenAiEngine> {
  const engine = new OpenAiEngine({ url, connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, ...overrides });
  disposables.push(() => engine.close());
  await engine.start();
  return engine;
}

describe('OpenAiEngine against the CPU engine server', () => {
  test('passes unknown fields through, maps the model and returns the JSON body unchanged', async () => {
    const { server, seen } = await cpuServer();
    const engine = await openAiEngine(`${server.url}/v1/`, { engineModel: 'served-name' });
    const run = await runEngine(engine, engineJob({ messages, max_tokens: 5, custom_field: { nested: [1, 2] }, stream_options: { include_usage: true } }));
    expect(run.error).toBeUndefined();
    expect(seen).toHaveLength(1);
    expect(seen[0].path).toBe('/v1/chat/completions');
    expect(seen[0].body).toEqual({ messages, max_tokens: 5, custom_field: { nested: [1, 2] }, model: 'served-name', stream: false });
    const body = JSON.parse(run.outputs[0].data.toString('utf8'));
    // The engine answered with its own name; the client gets the catalog model it asked for.
    expect(body).toMatchObject({ object: 'chat.completion', model: 'test-model' });
    expect(run.result).toEqual({
      usage: { promptTokens: countTokens(messages[0].content), completionTokens: 5, totalTokens: countTokens(messages[0].content) + 5 },
      finishReason: 'length', usageEstimated: false, responseId: body.id,
    });
  });

  test('streams SSE, always asks the engine for usage, and drops the usage chunk and [DONE]', async () => {
    const { server, seen } = await cpuServer();
    const engine = await openAiEngine(server.url);
    const run = await runEngine(engine, engineJob({ messages, stream: true, max_tokens: 7 }));
    expect(run.error).toBeUndefined();
    expect(seen[0].body.stream_options).toEqual({ include_usage: true });
    expect(seen[0].body.model).toBe('test-model');
    const events = sseEvents(run.text);
    expect(events).not.toContain('[DONE]');
    expect(events.every((event) => event !== '[DONE]' && event.choices.length > 0)).toBe(true);
    expect(countTokens(streamedText(events))).toBe(7);
    expect(run.result?.usage.completionTokens).toBe(7);
    expect(run.result?.finishReason).toBe('length');
  });

  test('forwards the usage chunk when the client asked for it', async () => {
    const { server } = await cpuServer();
    const engine = await openAiEngine(server.url);
    const run = await runEngine(engine, engineJob({ messages, stream: true, stream_options: { include_usage: true }, max_tokens: 2 }));
    const events = sseEvents(run.text) as Array<Record<string, any>>;
    expect(events.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 2 } });
  });

  test('routes completion jobs to /v1/completions', async () => {
    const { server, seen } = await cpuServer();
    const engine = await openAiEngine(server.url);
    const run = await runEngine(engine, engineJob({ prompt: 'one two', max_tokens: 2 }, { kind: 'JOB_KIND_COMPLETION' }));
    expect(seen[0].path).toBe('/v1/completions');
    expect(run.result?.usage).toEqual({ promptTokens: 2, completionTokens: 2, totalTokens: 4 });
  });

  test('an engine 400 is engine_rejected with its status and body', async () => {
    const { server } = await cpuServer();
    const engine = await openAiEngine(server.url);
    const run = await runEngine(engine, engineJob({ prompt: 'no messages here' }));
    const failure = run.error as EngineFailure;
    expect(failure.code).toBe('engine_rejected');
    expect(failure.engineStatus).toBe(400);
    expect(JSON.parse(failure.engineBody!.toString()).error).toMatchObject({ type: 'invalid_request_error', param: 'messages' });
  });

  test('an unreachable engine is engine_unavailable and unhealthy', async () => {
    const { server } = await cpuServer();
    const url = server.url;
    await server.close();
    const engine = await openAiEngine(url);
    expect(engine.health().status).toBe('ENGINE_HEALTH_UNHEALTHY');
    const run = await runEngine(engine, engineJob({ messages }));
    expect((run.error as EngineFailure).code).toBe('engine_unavailable');
  });

  test('reports health and served models from GET /v1/models', async () => {
    const { server } = await cpuServer();
    const engine = await openAiEngine(server.url);
    expect(engine.health()).toEqual({ status: 'ENGINE_HEALTH_HEALTHY', detail: '' });
    expect(engine.models()).toEqual(['cpu']);
  });

  test('a stream the engine breaks mid-way is engine_error', async () => {
    const { server } = await cpuServer({ options: { testControls: true } });
    const engine = await openAiEngine(server.url);
    const run = await runEngine(engine, engineJob({ messages, stream: true, max_tokens: 20, cpu_engine: { fail_after_tokens: 3 } }));
    expect((run.error as EngineFailure).code).toBe('engine_error');
  });

  test('aborting closes the upstream request at once', async () => {
    const { server } = await cpuServer({ options: { tokensPerSecond: 20 } });
    const engine = await openAiEngine(server.url);
    const cancellation = new JobCancellation();
    const run = await runEngine(engine, engineJob({ messages, stream: true, max_tokens: 1000 }), cancellation, () => cancellation.abort(new EngineFailure('canceled', 'test abort')));
    expect(run.error).toBeInstanceOf(EngineFailure);
    expect((run.error as EngineFailure).code).toBe('canceled');
    // The abort still reports what was consumed, so a canceled stream is never metered as free.
    expect((run.error as EngineFailure).usage!.totalTokens).toBeGreaterThan(0);
    const deadline = Date.now() + 1_000;
    while (server.activeRequests() > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(server.activeRequests()).toBe(0);
  });
});

describe('OpenAiEngine with an engine model name (WORKER_ENGINE_MODEL, issue 35)', () => {
  // The catalog id has a slash (written as-is by JSON.stringify); the engine knows the model by another name.
  const catalog = 'acme/catalog-model';
  const job = (body: Record<string, unknown>, kind?: 'JOB_KIND_COMPLETION' | 'JOB_KIND_EMBEDDING') =>
    engineJob(body, { model: catalog, ...(kind ? { kind } : {}) });

  async function servedAs(name: string) {
    const { server, seen } = await cpuServer();
    return { engine: await openAiEngine(server.url, { engineModel: name }), seen };
  }

  function jsonModel(run: Awaited<ReturnType<typeof runEngine>>): unknown {
    expect(run.error).toBeUndefined();
    return JSON.parse(run.outputs[0].data.toString('utf8')).model;
  }

  function streamModels(run: Awaited<ReturnType<typeof runEngine>>): unknown[] {
    expect(run.error).toBeUndefined();
    const events = sseEvents(run.text) as Array<Record<string, any>>;
    expect(events.length).toBeGreaterThan(2);
    return events.map((event) => event.model);
  }

  test('chat: the JSON answer and every stream chunk (the usage chunk included) carry the catalog model', async () => {
    const { engine, seen } = await servedAs('served-name');
    expect(jsonModel(await runEngine(engine, job({ messages, max_tokens: 3 })))).toBe(catalog);
    const streamed = await runEngine(engine, job({ messages, max_tokens: 4, stream: true, stream_options: { include_usage: true } }));
    const models = streamModels(streamed);
    expect(new Set(models)).toEqual(new Set([catalog]));
    expect(streamed.text).not.toContain('served-name');
    expect(seen.map((request) => request.body.model)).toEqual(['served-name', 'served-name']);
  });

  test('completions: the JSON answer and every stream chunk carry the catalog model', async () => {
    const { engine } = await servedAs('served-name');
    expect(jsonModel(await runEngine(engine, job({ prompt: 'one two', max_tokens: 2 }, 'JOB_KIND_COMPLETION')))).toBe(catalog);
    const streamed = await runEngine(engine, job({ prompt: 'one two', max_tokens: 4, stream: true }, 'JOB_KIND_COMPLETION'));
    expect(new Set(streamModels(streamed))).toEqual(new Set([catalog]));
  });

  test('embeddings: the answer carries the catalog model, its vectors unchanged', async () => {
    const { engine, seen } = await servedAs('served-name');
    const run = await runEngine(engine, job({ input: ['a b', 'c'] }, 'JOB_KIND_EMBEDDING'));
    expect(jsonModel(run)).toBe(catalog);
    expect(seen[0]).toMatchObject({ path: '/v1/embeddings', body: { model: 'served-name' } });
    const direct = (await runEngine(await openAiEngine((await cpuServer()).server.url), engineJob({ input: ['a b', 'c'] }, { model: 'served-name', kind: 'JOB_KIND_EMBEDDING' }))).outputs[0].data;
    expect(JSON.parse(run.outputs[0].data.toString('utf8')).data).toEqual(JSON.parse(direct.toString('utf8')).data);
    expect(run.result?.usage.promptTokens).toBe(3);
  });

  test('a name split across reads is still replaced; the same text inside content is not', async () => {
    const model = '"model":"served-name"';
    const event = (content: string, finish: string | null) =>
      `data: {"id":"c1","object":"chat.completion.chunk","created":1,${model},"choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":${JSON.stringify(finish)}}]}\n\n`;
    const stream = event('say {"model":"served-name"}', null) + event('!', 'stop')
      + `data: {"id":"c1","object":"chat.completion.chunk","created":1,${model},"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\ndata: [DONE]\n\n`;
    // Cut inside the first event's key and value, inside the second event's value, and just before the usage chunk's.
    const first = stream.indexOf(model);
    const second = stream.indexOf(model, stream.indexOf('\n\n'));
    const cuts = [first + 3, first + 14, second + 12, stream.lastIndexOf(model) - 1];
    const server = http.createServer(async (request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      let from = 0;
      for (const cut of [...cuts, stream.length]) {
        response.write(stream.slice(from, cut));
        from = cut;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      response.end();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    disposables.push(async () => { server.close(); });
    const engine = await openAiEngine(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, { engineModel: 'served-name' });
    const run = await runEngine(engine, job({ messages, stream: true }));
    expect(run.chunks.length).toBeGreaterThan(1);
    const events = sseEvents(run.text) as Array<Record<string, any>>;
    expect(events.map((chunk) => chunk.model)).toEqual([catalog, catalog]);
    expect(events[0].choices[0].delta.content).toBe('say {"model":"served-name"}');
    expect(run.result).toEqual({ usage: { promptTokens: 3, completionTokens: 2, totalTokens: 5 }, finishReason: 'stop', usageEstimated: false, responseId: 'c1' });
  });

  test('an engine model equal to the catalog id changes nothing', async () => {
    const { engine, seen } = await servedAs('acme/catalog-model');
    const run = await runEngine(engine, job({ messages, max_tokens: 2 }));
    expect(seen[0].body.model).toBe(catalog);
    expect(jsonModel(run)).toBe(catalog);
  });
});

describe('OpenAiEngine against an engine that reports no usage', () => {
  test('estimates usage from content chunks and prompt length', async () => {
    const server = http.createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const word of ['Hi', ' there', ' friend']) {
        response.write(`data: {"choices":[{"index":0,"delta":{"content":"${word}"},"finish_reason":null}]}\n\n`);
      }
      response.end('data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    disposables.push(async () => { server.close(); });
    const engine = await openAiEngine(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const run = await runEngine(engine, engineJob({ messages: [{ role: 'user', content: '12345678' }], stream: true }));
    expect(run.result).toEqual({ usage: { promptTokens: 2, completionTokens: 3, totalTokens: 5 }, finishReason: 'stop', usageEstimated: true });
  });
});
