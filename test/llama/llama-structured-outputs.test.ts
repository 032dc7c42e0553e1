import { ChatOpenAI } from '@langchain/openai';
import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from '@openai/agents';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

import { runAiSdk } from './support/ai-sdk-client';
import { llamaDeploymentForSuite } from './support/llama-deployment';

const CONTEXT_SIZE = 4096;
const SEEDS = [1, 2, 3];

const Weather = z.object({
  city: z.string(),
  temperature: z.number(),
  days: z.int(),
  unit: z.enum(['celsius', 'fahrenheit']),
  tags: z.array(z.string()).max(3),
  note: z.string().nullable(),
  detail: z.union([z.literal('none'), z.object({ wind: z.boolean(), gusts: z.array(z.int()).max(2) })]),
});
const GetWeather = z.object({ city: z.string(), days: z.int() });
const GetTime = z.object({ zone: z.enum(['utc', 'cet', 'pst']), precise: z.boolean().nullable() });
const tools = [
  zodFunction({ name: 'get_weather', parameters: GetWeather, description: 'Weather forecast for a city' }),
  zodFunction({ name: 'get_time', parameters: GetTime }),
];
const parametersOf: Record<string, z.ZodType> = { get_weather: GetWeather, get_time: GetTime };

/**
 * Structured outputs and tool calls on llama.cpp, client → gateway → agent → llama.cpp, with
 * the official SDK's helpers, on the random-weight tiny model: whatever it would say, the
 * grammar leaves it only output that the client's zod schema accepts.
 */
describe('llama.cpp structured outputs and tool calls', () => {
  const served = llamaDeploymentForSuite('tiny-tools.gguf', { contextSize: CONTEXT_SIZE });

  const ask = (content: string) => [{ role: 'user' as const, content }];

  it('parses a zodResponseFormat answer that satisfies the zod schema, under several seeds', async () => {
    for (const seed of SEEDS) {
      const completion = await served.client.chat.completions.parse({ model: served.modelId, messages: ask('Weather in Oslo?'), seed, response_format: zodResponseFormat(Weather, 'weather') });
      const [choice] = completion.choices;
      expect(choice.finish_reason).toBe('stop');
      expect(Weather.parse(choice.message.parsed)).toEqual(choice.message.parsed);
      expect(JSON.parse(choice.message.content!)).toEqual(choice.message.parsed);
    }
  });

  it('takes z.toJSONSchema output as is: 2020-12, $defs and a recursive $ref', async () => {
    const Tree: z.ZodType<{ name: string; children: Array<{ name: string; children: unknown[] }> }> = z.object({ name: z.string().max(8), get children() { return z.array(Tree).max(1); } });
    const schema = z.toJSONSchema(z.object({ root: Tree, size: z.int().nullable() }));
    const completion = await served.client.chat.completions.create({
      model: served.modelId, messages: ask('A tree'), seed: 5, response_format: { type: 'json_schema', json_schema: { name: 'tree', schema, strict: true } },
    });
    expect(completion.choices[0].finish_reason).toBe('stop');
    z.object({ root: Tree, size: z.int().nullable() }).parse(JSON.parse(completion.choices[0].message.content!));
  });

  it('answers json_object with a JSON object, and says "length" when max_tokens cuts it', async () => {
    for (const seed of SEEDS) {
      const completion = await served.client.chat.completions.create({ model: served.modelId, messages: ask('Any JSON'), seed, response_format: { type: 'json_object' } });
      expect(completion.choices[0].finish_reason).toBe('stop');
      expect(z.record(z.string(), z.unknown()).parse(JSON.parse(completion.choices[0].message.content!))).toBeDefined();
    }
    // `{"city": ` alone is more than 5 tokens of the byte-level vocabulary.
    const cut = await served.client.chat.completions.create({ model: served.modelId, messages: ask('Weather'), seed: 1, max_tokens: 5, response_format: zodResponseFormat(Weather, 'weather') });
    expect(cut.choices[0].finish_reason).toBe('length');
    expect(cut.choices[0].message.content).toMatch(/^\{/);
    expect(cut.usage!.completion_tokens).toBe(5);
  });

  it('calls an allowed tool with arguments that satisfy its parameters when a call is required', async () => {
    for (const seed of SEEDS) {
      const completion = await served.client.chat.completions.create({ model: served.modelId, messages: ask('Weather and time?'), seed, tools, tool_choice: 'required' });
      const [choice] = completion.choices;
      expect(choice.finish_reason).toBe('tool_calls');
      expect(choice.message.content).toBeNull();
      expect(choice.message.tool_calls!.length).toBeGreaterThanOrEqual(1);
      for (const call of choice.message.tool_calls!) {
        if (call.type !== 'function') throw new Error(`a ${call.type} tool call`);
        expect(call.id).toMatch(/^call_/);
        expect(Object.keys(parametersOf)).toContain(call.function.name);
        parametersOf[call.function.name].parse(JSON.parse(call.function.arguments));
      }
    }
  });

  it('calls the named function only, once when parallel_tool_calls is false; parse() reads its arguments', async () => {
    for (const seed of SEEDS) {
      const completion = await served.client.chat.completions.parse({
        model: served.modelId, messages: ask('Forecast please'), seed, tools, parallel_tool_calls: false, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      });
      const calls = completion.choices[0].message.tool_calls;
      expect(calls).toHaveLength(1);
      expect(calls[0].function.name).toBe('get_weather');
      expect(GetWeather.parse(calls[0].function.parsed_arguments)).toEqual(calls[0].function.parsed_arguments);
    }
  });

  it('streams tool calls in OpenAI\'s delta shape, assembled by the SDK\'s stream helper', async () => {
    const stream = served.client.chat.completions.stream({ model: served.modelId, messages: ask('Time?'), seed: 4, tools, tool_choice: 'required', stream_options: { include_usage: true } });
    const deltas: unknown[] = [];
    stream.on('chunk', (chunk) => { if (chunk.choices[0]?.delta?.tool_calls) deltas.push(...chunk.choices[0].delta.tool_calls); });
    const final = await stream.finalChatCompletion();
    const [choice] = final.choices;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.tool_calls.length).toBeGreaterThanOrEqual(1);
    for (const call of choice.message.tool_calls) parametersOf[call.function.name].parse(JSON.parse(call.function.arguments));
    expect(deltas[0]).toEqual({ index: 0, id: expect.stringMatching(/^call_/), type: 'function', function: { name: expect.any(String), arguments: '' } });
    // The arguments arrive as they are generated, a fragment per token or so, not in one piece.
    const fragments = (deltas as Array<{ index: number; function?: { arguments?: string } }>).filter((delta) => delta.index === 0 && delta.function?.arguments);
    expect(fragments.length).toBeGreaterThan(3);
    expect(fragments.map((delta) => delta.function!.arguments).join('')).toBe(choice.message.tool_calls[0].function.arguments);
    expect(final.usage!.completion_tokens).toBeGreaterThan(0);
  });

  it('accepts an agent loop turn: the assistant\'s tool_calls and the tool\'s result go into the prompt', async () => {
    const first = await served.client.chat.completions.create({ model: served.modelId, messages: ask('Weather in Oslo?'), seed: 1, tools, tool_choice: 'required' });
    const message = first.choices[0].message;
    const results = message.tool_calls!.map((call) => ({ role: 'tool' as const, tool_call_id: call.id, content: '{"temperature": 4}' }));
    const messages: OpenAI.ChatCompletionMessageParam[] = [...ask('Weather in Oslo?'), message, ...results];
    const second = await served.client.chat.completions.create({ model: served.modelId, messages, seed: 1, tools, max_tokens: 8 });
    const [choice] = second.choices;
    expect(['length', 'tool_calls', 'stop']).toContain(choice.finish_reason);
    // The earlier turns are in the prompt: it is longer than the question alone by their text.
    const alone = await served.client.chat.completions.create({ model: served.modelId, messages: ask('Weather in Oslo?'), seed: 1, tools, max_tokens: 1 });
    const callText = JSON.stringify(message.tool_calls!.map((call) => ({ name: call.type === 'function' ? call.function.name : '', arguments: JSON.parse(call.type === 'function' ? call.function.arguments : '{}') })));
    expect(second.usage!.prompt_tokens).toBeGreaterThan(alone.usage!.prompt_tokens + callText.length);
    const none = await served.client.chat.completions.create({ model: served.modelId, messages, seed: 1, tools, tool_choice: 'none', max_tokens: 4 });
    expect(none.choices[0]).toMatchObject({ finish_reason: 'length', message: { content: expect.any(String) } });
  });

  it('serves LangChain: withStructuredOutput with both methods, and bindTools with a required call', async () => {
    const chat = new ChatOpenAI({ model: served.modelId, apiKey: served.workspace.apiKey, configuration: { baseURL: served.deployment.baseUrl }, maxRetries: 0, modelKwargs: { seed: 7 } });
    const Answer = z.object({ title: z.string().max(20), score: z.int(), flags: z.array(z.boolean()).max(3) });
    for (const method of ['jsonSchema', 'functionCalling'] as const) {
      const answer = await chat.withStructuredOutput(Answer, { method, name: 'answer' }).invoke('Rate the weather');
      expect(Answer.parse(answer)).toEqual(answer);
    }
    const message = await chat.bindTools([{ type: 'function', function: { name: 'get_weather', description: 'Forecast', parameters: z.toJSONSchema(GetWeather) } }], { tool_choice: 'required' }).invoke('Oslo?');
    expect(message.tool_calls!.length).toBeGreaterThanOrEqual(1);
    for (const call of message.tool_calls!) {
      expect(call.name).toBe('get_weather');
      GetWeather.parse(call.args);
    }
  });

  it('serves the Vercel AI SDK\'s chat provider: generateObject, and generateText with a required tool', async () => {
    const answers = await runAiSdk(served.deployment.baseUrl, served.workspace.apiKey, served.modelId);
    z.object({ title: z.string().max(20), score: z.int(), flags: z.array(z.boolean()).max(3) }).parse(answers.object);
    expect(answers.finishReason).toBe('tool-calls');
    expect(answers.toolCalls.length).toBeGreaterThanOrEqual(1);
    for (const call of answers.toolCalls) {
      expect(call.name).toBe('get_weather');
      GetWeather.parse(call.input);
    }
  });

  it('runs an @openai/agents agent with a function tool to its final output', async () => {
    // Traces would go to api.openai.com: none leave a test.
    setTracingDisabled(true);
    const asked: unknown[] = [];
    // The city's length is bounded, so the random model's call always fits in 600 tokens (an
    // unbounded string ran past them once, and a call cut by max_tokens is text, not a call).
    const BoundedWeather = z.object({ city: z.string().max(24), days: z.int() });
    const getWeather = tool({ name: 'get_weather', description: 'Forecast for a city', parameters: BoundedWeather, execute: async (input) => { asked.push(input); return 'sunny, 4 degrees'; } });
    // Turn 1 must call the tool; the SDK then resets tool_choice, and the model answers.
    const agent = new Agent({ name: 'forecaster', instructions: 'Answer briefly.', tools: [getWeather], model: new OpenAIChatCompletionsModel(served.client, served.modelId), modelSettings: { toolChoice: 'required', maxTokens: 600 } });
    const result = await run(agent, 'Weather in Oslo?');
    expect(asked.length).toBeGreaterThanOrEqual(1);
    for (const input of asked) BoundedWeather.parse(input);
    expect(typeof result.finalOutput).toBe('string');
  });

  it('refuses a schema keyword the grammar cannot honour, and malformed tool requests, with a 400 naming them', async () => {
    const refusal = async (body: Record<string, unknown>) => {
      const error = await served.client.chat.completions.create({ model: served.modelId, messages: ask('x'), max_tokens: 2, ...body } as never).then(() => undefined, (failure: unknown) => failure);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      return (error as InstanceType<typeof OpenAI.BadRequestError>).error as { param: string; code: string; message: string };
    };
    const pattern = await refusal({ response_format: zodResponseFormat(z.object({ code: z.string().regex(/^[A-Z]{3}$/) }), 'code') });
    expect(pattern).toMatchObject({ param: 'response_format.json_schema.schema.properties.code.pattern', code: 'unsupported_parameter' });
    expect(pattern.message).toContain('`pattern`');
    expect(await refusal({ response_format: zodResponseFormat(z.object({ age: z.number().min(0) }), 'age') })).toMatchObject({ param: 'response_format.json_schema.schema.properties.age.minimum' });
    const mail = { type: 'function', function: { name: 'mail', parameters: { type: 'object', properties: { to: { type: 'string', format: 'email' } }, required: ['to'] } } };
    const format = await refusal({ tools: [mail], tool_choice: 'required' });
    expect(format).toMatchObject({ param: 'tools[0].function.parameters.properties.to.format' });
    expect(format.message).toContain('date-time, date, time');
    expect(await refusal({ tools, tool_choice: { type: 'function', function: { name: 'nope' } } })).toMatchObject({ param: 'tool_choice.function.name' });
    expect(await refusal({ messages: [{ role: 'tool', content: 'x' }] })).toMatchObject({ param: 'messages[0].tool_call_id' });
    expect(await refusal({ tools, response_format: { type: 'json_object' } })).toMatchObject({ param: 'response_format', code: 'unsupported_parameter' });
    expect(await refusal({ logprobs: true })).toMatchObject({ param: 'logprobs', code: 'unsupported_parameter' });
  });
});
