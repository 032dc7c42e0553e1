/**
 * The CPU engine honours tools, tool_choice, response_format and logprobs
 * (worker-agent/engines/cpu-answer-shape.ts): schema-valid JSON and tool arguments, OpenAI's
 * tool-call shapes whole and streamed, real log probabilities of its own tokens.
 */
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { validateInstance } from '../../common/json-schema';
import { engineJob, runEngine, sseEvents, streamedText } from './support/engine-harness';

const order = {
  type: 'object',
  properties: {
    id: { type: 'string', format: 'uuid' },
    items: { type: 'array', items: { type: 'object', properties: { sku: { type: 'string', pattern: '^[A-Z]{3}-\\d{2}$' }, qty: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['sku', 'qty'], additionalProperties: false }, minItems: 1 },
    note: { type: ['string', 'null'] },
  },
  required: ['id', 'items', 'note'],
  additionalProperties: false,
};
const weather = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { enum: ['c', 'f'] } }, required: ['city', 'unit'], additionalProperties: false } } };
const time = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', minLength: 3 } }, required: ['zone'] } } };
const noParameters = { type: 'function', function: { name: 'ping' } };
const ask = (content: string) => [{ role: 'user', content }];

async function chat(body: Record<string, unknown>) {
  const run = await runEngine(new CpuEngine(), engineJob({ messages: ask('Plan my day'), ...body }));
  if (run.error) throw run.error;
  return body.stream ? { run, events: sseEvents(run.text) as Array<Record<string, any>>, body: undefined as any } : { run, events: [], body: JSON.parse(run.outputs[0].data.toString('utf8')) };
}

async function refusal(body: Record<string, unknown>) {
  const run = await runEngine(new CpuEngine(), engineJob({ messages: ask('Plan my day'), ...body }));
  expect(run.error).toBeInstanceOf(EngineFailure);
  const failure = run.error as EngineFailure;
  return { status: failure.engineStatus, error: JSON.parse(failure.engineBody!.toString()).error };
}

describe('CpuEngine structured outputs', () => {
  test('json_schema: deterministic JSON that validates, finish "stop", tokens counted', async () => {
    const request = { response_format: { type: 'json_schema', json_schema: { name: 'order', schema: order, strict: true } }, max_tokens: 400, seed: 3 };
    const { body } = await chat(request);
    const content = body.choices[0].message.content as string;
    expect(validateInstance(order, JSON.parse(content))).toBeNull();
    expect(body.choices[0].finish_reason).toBe('stop');
    expect(body.usage.completion_tokens).toBe(countTokens(content));
    expect((await chat(request)).body.choices[0].message.content).toBe(content);
    expect((await chat({ ...request, seed: 4 })).body.choices[0].message.content).not.toBe(content);
    const streamed = await chat({ ...request, stream: true, stream_options: { include_usage: true } });
    expect(streamedText(streamed.events)).toBe(content);
    expect(streamed.events.find((event) => event.choices?.[0]?.finish_reason)?.choices[0].finish_reason).toBe('stop');
    expect(streamed.events.find((event) => event.usage)?.usage.completion_tokens).toBe(countTokens(content));
  });

  test('json_schema: max_tokens too small cuts the JSON, finish "length"', async () => {
    const { body } = await chat({ response_format: { type: 'json_schema', json_schema: { name: 'order', schema: order } }, max_tokens: 5 });
    expect(body.choices[0].finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(5);
    expect(countTokens(body.choices[0].message.content)).toBe(5);
  });

  test('json_object: a small JSON object', async () => {
    const { body } = await chat({ response_format: { type: 'json_object' }, max_tokens: 100 });
    expect(typeof JSON.parse(body.choices[0].message.content)).toBe('object');
    expect(body.choices[0].finish_reason).toBe('stop');
  });

  test('a schema no value satisfies is a 400 naming it', async () => {
    const refused = await refusal({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'integer', minimum: 2, maximum: 1 } } } });
    expect(refused.status).toBe(400);
    expect(refused.error.param).toBe('response_format.json_schema.schema');
  });
});

describe('CpuEngine tool calls', () => {
  test('required: a call with schema-valid arguments, content null, finish "tool_calls"', async () => {
    const { body } = await chat({ tools: [weather, time], tool_choice: 'required', max_tokens: 200 });
    const message = body.choices[0].message;
    expect(message.content).toBeNull();
    expect(body.choices[0].finish_reason).toBe('tool_calls');
    expect(message.tool_calls).toHaveLength(1);
    const [call] = message.tool_calls;
    expect(call).toMatchObject({ id: expect.stringMatching(/^call_[0-9a-f]{24}$/), type: 'function', function: { name: 'get_weather' } });
    expect(validateInstance(weather.function.parameters, JSON.parse(call.function.arguments))).toBeNull();
    expect(body.usage.completion_tokens).toBe(countTokens('get_weather') + countTokens(call.function.arguments));
  });

  test('a named function is called; a tool without parameters gets {}', async () => {
    const named = await chat({ tools: [weather, time], tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200 });
    expect(named.body.choices[0].message.tool_calls[0].function.name).toBe('get_time');
    const ping = await chat({ tools: [noParameters], tool_choice: 'required' });
    expect(ping.body.choices[0].message.tool_calls[0].function.arguments).toBe('{}');
  });

  test('auto: calls the tools the user names (in parallel unless parallel_tool_calls is false)', async () => {
    const messages = ask('Use get_time and get_weather for Paris');
    const parallel = await chat({ messages, tools: [weather, time, noParameters], max_tokens: 200 });
    expect(parallel.body.choices[0].message.tool_calls.map((call: any) => call.function.name)).toEqual(['get_weather', 'get_time']);
    const single = await chat({ messages, tools: [weather, time], parallel_tool_calls: false, max_tokens: 200 });
    expect(single.body.choices[0].message.tool_calls.map((call: any) => call.function.name)).toEqual(['get_weather']);
    const unnamed = await chat({ tools: [time, weather], tool_choice: 'auto', max_tokens: 200 });
    expect(unnamed.body.choices[0].message.tool_calls.map((call: any) => call.function.name)).toEqual(['get_time']);
  });

  test('auto after a tool result, and none: a one-sentence text answer, finish "stop"', async () => {
    const afterTool = [...ask('weather?'), { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }];
    for (const body of [{ messages: afterTool, tools: [weather] }, { tools: [weather], tool_choice: 'none' }]) {
      const { body: answer } = await chat({ ...body, max_tokens: 64 });
      expect(answer.choices[0].message.tool_calls).toBeUndefined();
      expect(answer.choices[0].message.content).toMatch(/\.$/);
      expect(answer.choices[0].finish_reason).toBe('stop');
    }
  });

  test('after a tool result with response_format: the final answer is the JSON', async () => {
    const messages = [...ask('weather?'), { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }];
    const { body } = await chat({ messages, tools: [weather], response_format: { type: 'json_schema', json_schema: { name: 'order', schema: order } }, max_tokens: 400 });
    expect(validateInstance(order, JSON.parse(body.choices[0].message.content))).toBeNull();
  });

  test('streams tool calls in OpenAI\'s delta shape', async () => {
    const whole = await chat({ messages: ask('get_weather and get_time please'), tools: [weather, time], max_tokens: 200, seed: 9 });
    const { events } = await chat({ messages: ask('get_weather and get_time please'), tools: [weather, time], max_tokens: 200, seed: 9, stream: true });
    const deltas = events.filter((event) => event.choices?.length).map((event) => event.choices[0]);
    expect(deltas[0].delta).toEqual({ role: 'assistant', content: null });
    const toolDeltas = deltas.filter((choice) => choice.delta.tool_calls).map((choice) => choice.delta.tool_calls);
    for (const calls of toolDeltas) expect(calls).toHaveLength(1);
    const starts = toolDeltas.filter(([call]) => call.id !== undefined).map(([call]) => call);
    expect(starts).toEqual([
      { index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_weather', arguments: '' } },
      { index: 1, id: expect.stringMatching(/^call_/), type: 'function', function: { name: 'get_time', arguments: '' } },
    ]);
    const argumentsOf = (index: number) => toolDeltas.filter(([call]) => call.index === index).map(([call]) => call.function.arguments).join('');
    expect([argumentsOf(0), argumentsOf(1)]).toEqual(whole.body.choices[0].message.tool_calls.map((call: any) => call.function.arguments));
    expect(deltas[deltas.length - 1]).toMatchObject({ delta: {}, finish_reason: 'tool_calls' });
  });

  test('max_tokens too small for the arguments: finish "length"', async () => {
    const { body } = await chat({ tools: [weather], tool_choice: 'required', max_tokens: 4 });
    expect(body.choices[0].finish_reason).toBe('length');
    expect(body.usage.completion_tokens).toBe(4);
  });

  test('a tool choice naming no listed tool is a 400', async () => {
    expect((await refusal({ tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } })).error.param).toBe('tool_choice.function.name');
  });
});

describe('CpuEngine logprobs', () => {
  test('real log probabilities of its own tokens, whole and streamed', async () => {
    const { body } = await chat({ logprobs: true, top_logprobs: 3, max_tokens: 12, seed: 5 });
    const content = body.choices[0].message.content as string;
    const entries = body.choices[0].logprobs.content as Array<{ token: string; logprob: number; bytes: number[]; top_logprobs: any[] }>;
    expect(entries).toHaveLength(body.usage.completion_tokens);
    expect(entries.map((entry) => entry.token).join('')).toBe(content);
    for (const entry of entries) {
      expect(entry.logprob).toBeLessThan(0);
      expect(Buffer.from(entry.bytes).toString('utf8')).toBe(entry.token);
      expect(entry.top_logprobs).toHaveLength(3);
      // The chosen token is never likelier than the most likely one.
      expect(entry.logprob).toBeLessThanOrEqual(entry.top_logprobs[0].logprob + 1e-12);
    }
    // The generator's own odds: a comma 0.07 and a full stop 0.05 after a word, else a uniform draw of its 55 words.
    const odds = [1 / 55, 0.88 / 55, 0.07, 0.05].map((probability) => Math.log(probability).toFixed(9));
    for (const entry of entries) expect(odds).toContain(entry.logprob.toFixed(9));

    const { events } = await chat({ logprobs: true, top_logprobs: 3, max_tokens: 12, seed: 5, stream: true });
    const streamed = events.flatMap((event) => event.choices ?? []).filter((choice: any) => choice.logprobs).flatMap((choice: any) => choice.logprobs.content);
    expect(streamed).toEqual(entries);
  });

  test('without logprobs the field is null; with JSON or tool calls they are refused by name', async () => {
    expect((await chat({ max_tokens: 3 })).body.choices[0].logprobs).toBeNull();
    const refused = await refusal({ logprobs: true, response_format: { type: 'json_object' } });
    expect(refused).toMatchObject({ status: 400, error: { param: 'logprobs', code: 'unsupported_parameter' } });
  });
});
