import { JobCancellation } from '../../worker-agent/job-cancellation';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { DEFAULT_CPU_ENGINE_OPTIONS } from '../../worker-agent/engines/cpu-engine-options';
import { engineJob, runEngine, sseEvents, streamedText } from './support/engine-harness';

const messages = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: [{ type: 'text', text: 'Hello, world!' }] }];

async function chat(body: Record<string, unknown>, engine = new CpuEngine()) {
  const run = await runEngine(engine, engineJob({ messages, ...body }));
  if (run.error) throw run.error;
  return { run, body: JSON.parse(run.outputs[0].data.toString('utf8')) };
}

describe('CpuEngine', () => {
  test('is deterministic in prompt and seed', async () => {
    const first = await chat({ seed: 7 });
    const again = await chat({ seed: 7 });
    const otherSeed = await chat({ seed: 8 });
    expect(first.body.choices[0].message.content).toBe(again.body.choices[0].message.content);
    expect(first.body.choices[0].message.content).not.toBe(otherSeed.body.choices[0].message.content);
  });

  test('answers in the chat.completion schema with exact usage', async () => {
    const { run, body } = await chat({ max_tokens: 5 });
    expect(run.outputs[0].contentType).toBe('application/json');
    expect(body).toMatchObject({ object: 'chat.completion', model: 'test-model', choices: [{ index: 0, logprobs: null, finish_reason: 'length', message: { role: 'assistant' } }] });
    expect(body.id).toMatch(/^chatcmpl-/);
    expect(typeof body.created).toBe('number');
    const content = body.choices[0].message.content as string;
    expect(countTokens(content)).toBe(5);
    const promptTokens = countTokens('You are terse.\nHello, world!');
    expect(body.usage).toEqual({ prompt_tokens: promptTokens, completion_tokens: 5, total_tokens: promptTokens + 5 });
    expect(run.result).toEqual({ usage: { promptTokens, completionTokens: 5, totalTokens: promptTokens + 5 }, finishReason: 'length', usageEstimated: false, responseId: body.id });
  });

  test('defaults max_tokens to 16 and counts every choice of n', async () => {
    const { body } = await chat({ n: 3 });
    expect(body.choices).toHaveLength(3);
    expect(body.choices.map((choice: any) => choice.index)).toEqual([0, 1, 2]);
    expect(body.usage.completion_tokens).toBe(48);
    expect(new Set(body.choices.map((choice: any) => choice.message.content)).size).toBeGreaterThan(1);
  });

  test('cuts the output before a stop sequence', async () => {
    const full = (await chat({ max_tokens: 12 })).body.choices[0].message.content as string;
    const stopWord = full.split(' ')[3];
    const { body } = await chat({ max_tokens: 12, stop: [stopWord, 'never-appears'] });
    const content = body.choices[0].message.content as string;
    expect(full.startsWith(content)).toBe(true);
    expect(content).not.toContain(stopWord);
    expect(body.choices[0].finish_reason).toBe('stop');
    expect(body.usage.completion_tokens).toBe(countTokens(content));
  });

  test('answers completions in the text_completion schema', async () => {
    const run = await runEngine(new CpuEngine(), engineJob({ prompt: 'Once upon a time', max_tokens: 4 }, { kind: 'JOB_KIND_COMPLETION' }));
    const body = JSON.parse(run.outputs[0].data.toString('utf8'));
    expect(body).toMatchObject({ object: 'text_completion', choices: [{ index: 0, logprobs: null, finish_reason: 'length' }], usage: { prompt_tokens: 4, completion_tokens: 4 } });
    expect(body.id).toMatch(/^cmpl-/);
  });

  test('answers n choices per prompt of a completions batch, prompt i\'s choice j at index i·n + j, usage summed', async () => {
    const prompts = ['Once upon a time', 'The replica said'];
    const body = { prompt: prompts, n: 2, max_tokens: 4, seed: 3 };
    const plain = JSON.parse((await runEngine(new CpuEngine(), engineJob(body, { kind: 'JOB_KIND_COMPLETION' }))).outputs[0].data.toString('utf8'));
    expect(plain.choices.map((choice: any) => choice.index)).toEqual([0, 1, 2, 3]);
    const promptTokens = countTokens(prompts[0]) + countTokens(prompts[1]);
    expect(plain.usage).toEqual({ prompt_tokens: promptTokens, completion_tokens: 16, total_tokens: promptTokens + 16 });
    // Each prompt's first choice is the answer that prompt gets on its own.
    const alone = JSON.parse((await runEngine(new CpuEngine(), engineJob({ prompt: prompts[0], max_tokens: 4, seed: 3 }, { kind: 'JOB_KIND_COMPLETION' }))).outputs[0].data.toString('utf8'));
    expect(plain.choices[0].text).toBe(alone.choices[0].text);
    expect(new Set(plain.choices.map((choice: any) => choice.text)).size).toBe(4);

    const run = await runEngine(new CpuEngine(), engineJob({ ...body, stream: true, stream_options: { include_usage: true } }, { kind: 'JOB_KIND_COMPLETION' }));
    const events = sseEvents(run.text) as Array<Record<string, any>>;
    const texts = ['', '', '', ''];
    for (const event of events) for (const choice of event.choices) texts[choice.index] += choice.text;
    expect(texts).toEqual(plain.choices.map((choice: any) => choice.text));
    expect(events.at(-1)!.usage).toEqual(plain.usage);
  });

  test('refuses an empty prompt batch, and more than 128 choices in all, naming the field', async () => {
    const failure = async (body: Record<string, unknown>) => {
      const error = (await runEngine(new CpuEngine(), engineJob(body, { kind: 'JOB_KIND_COMPLETION' }))).error as EngineFailure;
      return { status: error.engineStatus, param: JSON.parse(error.engineBody!.toString()).error.param };
    };
    expect(await failure({ prompt: [] })).toEqual({ status: 400, param: 'prompt' });
    expect(await failure({ prompt: ['a', 'b'], n: 65 })).toEqual({ status: 400, param: 'n' });
  });

  test('streams chat chunks as SSE bytes without [DONE] and without usage unless asked', async () => {
    const run = await runEngine(new CpuEngine(), engineJob({ messages, stream: true, max_tokens: 6 }));
    const events = sseEvents(run.text);
    expect(events).not.toContain('[DONE]');
    const chunks = events as Array<Record<string, any>>;
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk' && chunk.choices.length === 1)).toBe(true);
    expect(chunks[0].choices[0].delta).toEqual({ role: 'assistant', content: '' });
    expect(chunks.at(-1)!.choices[0]).toMatchObject({ delta: {}, finish_reason: 'length' });
    expect(countTokens(streamedText(events))).toBe(6);
    expect(run.result?.usage.completionTokens).toBe(6);
  });

  test('forwards the usage chunk when the client asked for include_usage', async () => {
    const run = await runEngine(new CpuEngine(), engineJob({ messages, stream: true, stream_options: { include_usage: true }, max_tokens: 3 }));
    const last = sseEvents(run.text).at(-1) as Record<string, any>;
    expect(last.choices).toEqual([]);
    expect(last.usage.completion_tokens).toBe(3);
  });

  test('streams completions as text_completion chunks', async () => {
    const run = await runEngine(new CpuEngine(), engineJob({ prompt: 'abc', stream: true, max_tokens: 3 }, { kind: 'JOB_KIND_COMPLETION' }));
    const events = sseEvents(run.text) as Array<Record<string, any>>;
    expect(events.every((event) => event.object === 'text_completion')).toBe(true);
    expect(countTokens(streamedText(events))).toBe(3);
  });

  test('rejects a request without messages with an OpenAI error body', async () => {
    const run = await runEngine(new CpuEngine(), engineJob({ model: 'x' }));
    expect(run.error).toBeInstanceOf(EngineFailure);
    const failure = run.error as EngineFailure;
    expect(failure.code).toBe('engine_rejected');
    expect(failure.engineStatus).toBe(400);
    expect(JSON.parse(failure.engineBody!.toString())).toEqual({
      error: { message: expect.any(String), type: 'invalid_request_error', param: 'messages', code: 'missing_required_parameter' },
    });
  });

  test('body that is not JSON is an invalid job', async () => {
    const run = await runEngine(new CpuEngine(), { ...engineJob({}), body: Buffer.from('{nope') });
    expect((run.error as EngineFailure).code).toBe('invalid_job');
  });

  test('paces tokens and fails mid-stream on the fail switch', async () => {
    const engine = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, ttftMs: 30, tokensPerSecond: 200, failAfterTokens: 4 });
    const startedAt = Date.now();
    const run = await runEngine(engine, engineJob({ messages, stream: true, max_tokens: 10 }));
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(40);
    expect((run.error as EngineFailure).code).toBe('engine_error');
    expect(countTokens(streamedText(sseEvents(run.text)))).toBe(4);
  });

  test('per-request test controls apply only when enabled', async () => {
    const body = { messages, stream: true, cpu_engine: { fail_after_tokens: 1 } };
    expect((await runEngine(new CpuEngine(), engineJob(body))).error).toBeUndefined();
    const controlled = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, testControls: true });
    expect(((await runEngine(controlled, engineJob(body))).error as EngineFailure).code).toBe('engine_error');
  });

  test('abort stops a slow generation at once', async () => {
    const cancellation = new JobCancellation();
    const engine = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, tokensPerSecond: 20 });
    const startedAt = Date.now();
    const run = await runEngine(engine, engineJob({ messages, stream: true, max_tokens: 100 }), cancellation, () => cancellation.abort(new EngineFailure('canceled', 'test abort')));
    expect(run.error).toBeDefined();
    // The whole generation would take 5 s; a loaded machine still stops it far sooner.
    expect(Date.now() - startedAt).toBeLessThan(2_000);
  });

  test('with an engine model name it still answers with the catalog model (issue 35)', async () => {
    const engine = new CpuEngine(DEFAULT_CPU_ENGINE_OPTIONS, 'served-name');
    const model = (run: Awaited<ReturnType<typeof runEngine>>) => {
      expect(run.error).toBeUndefined();
      return JSON.parse(run.outputs[0].data.toString('utf8')).model;
    };
    const streamModels = (run: Awaited<ReturnType<typeof runEngine>>) => {
      expect(run.error).toBeUndefined();
      return new Set((sseEvents(run.text) as Array<Record<string, any>>).map((event) => event.model));
    };
    expect(model(await runEngine(engine, engineJob({ messages, max_tokens: 2 })))).toBe('test-model');
    expect(streamModels(await runEngine(engine, engineJob({ messages, max_tokens: 3, stream: true, stream_options: { include_usage: true } })))).toEqual(new Set(['test-model']));
    const completion = { kind: 'JOB_KIND_COMPLETION' } as const;
    expect(model(await runEngine(engine, engineJob({ prompt: 'abc', max_tokens: 2 }, completion)))).toBe('test-model');
    expect(streamModels(await runEngine(engine, engineJob({ prompt: 'abc', max_tokens: 3, stream: true }, completion)))).toEqual(new Set(['test-model']));
    const embedding = { kind: 'JOB_KIND_EMBEDDING' } as const;
    const vectors = await runEngine(engine, engineJob({ input: 'x' }, embedding));
    expect(model(vectors)).toBe('test-model');
    // The vectors stay those of the engine's model: the name it serves is what they are drawn from.
    const direct = await runEngine(new CpuEngine(), engineJob({ input: 'x' }, { ...embedding, model: 'served-name' }));
    expect(JSON.parse(vectors.outputs[0].data.toString('utf8')).data).toEqual(JSON.parse(direct.outputs[0].data.toString('utf8')).data);
  });
});
