/**
 * Tool calls and structured outputs through the whole platform on the built-in CPU engine, with
 * stock clients at their current versions: the `openai` SDK's parse, tools and stream helpers,
 * and LangChain's structured output and bindTools (docs/api-contract.md#tools-and-structured-outputs).
 */
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { startWithDeployment, type TestServer } from '../support/test-server';

const Recipe = z.object({
  title: z.string().min(1),
  servings: z.number().int().min(1).max(12),
  difficulty: z.enum(['easy', 'medium', 'hard']),
  ingredients: z.array(z.object({ name: z.string(), grams: z.number().min(0) })).min(1).max(5),
  vegetarian: z.boolean(),
  source: z.string().url().nullable(),
});
const WeatherArgs = z.object({ city: z.string().min(2), unit: z.enum(['celsius', 'fahrenheit']) });
const TimeArgs = z.object({ zone: z.string() });
const tools = [zodFunction({ name: 'get_weather', parameters: WeatherArgs }), zodFunction({ name: 'get_time', parameters: TimeArgs })];

describe('tools and structured outputs with stock clients (built-in CPU engine)', () => {
  let test: TestServer;
  let client: OpenAI;
  let baseURL: string;
  let apiKey: string;
  let model: string;

  beforeAll(async () => {
    ({ test, workspace: { apiKey }, deployment: { baseUrl: baseURL }, modelId: model, client } = await startWithDeployment());
  });

  afterAll(async () => {
    await test?.stop();
  });

  describe('openai SDK', () => {
    it('chat.completions.parse with zodResponseFormat returns a parsed object the schema accepts', async () => {
      const completion = await client.chat.completions.parse({
        model, messages: [{ role: 'user', content: 'A recipe for soup' }], response_format: zodResponseFormat(Recipe, 'recipe'), max_tokens: 500,
      });
      const choice = completion.choices[0];
      expect(choice.finish_reason).toBe('stop');
      expect(Recipe.parse(choice.message.parsed)).toEqual(choice.message.parsed);
      expect(completion.usage!.completion_tokens).toBeGreaterThan(0);
    });

    it('tool_choice required, named, auto and none', async () => {
      const ask = (content: string) => [{ role: 'user' as const, content }];
      const required = await client.chat.completions.parse({ model, messages: ask('What should I do?'), tools, tool_choice: 'required', max_tokens: 200 });
      expect(required.choices[0].finish_reason).toBe('tool_calls');
      expect(required.choices[0].message.content).toBeNull();
      const [call] = required.choices[0].message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(call.id).toMatch(/^call_/);
      expect(call.function.name).toBe('get_weather');
      expect(WeatherArgs.parse((call.function as { parsed_arguments?: unknown }).parsed_arguments)).toEqual(JSON.parse(call.function.arguments));

      const named = await client.chat.completions.create({ model, messages: ask('Anything'), tools, tool_choice: { type: 'function', function: { name: 'get_time' } }, max_tokens: 200 });
      expect((named.choices[0].message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall).function.name).toBe('get_time');

      const parallel = await client.chat.completions.create({ model, messages: ask('Call get_time and get_weather for Oslo'), tools, max_tokens: 200 });
      const names = parallel.choices[0].message.tool_calls!.map((toolCall) => (toolCall as OpenAI.ChatCompletionMessageFunctionToolCall).function.name);
      expect(names).toEqual(['get_weather', 'get_time']);
      const single = await client.chat.completions.create({ model, messages: ask('Call get_time and get_weather'), tools, parallel_tool_calls: false, max_tokens: 200 });
      expect(single.choices[0].message.tool_calls).toHaveLength(1);

      const none = await client.chat.completions.create({ model, messages: ask('Just talk'), tools, tool_choice: 'none', max_tokens: 64 });
      expect(none.choices[0].message.tool_calls).toBeUndefined();
      expect(none.choices[0].finish_reason).toBe('stop');
      expect(none.choices[0].message.content).toMatch(/\.$/);
    });

    it('chat.completions.stream with tools: finalChatCompletion has the assembled tool calls', async () => {
      const body = { model, messages: [{ role: 'user' as const, content: 'get_weather and get_time, please' }], tools, max_tokens: 200, seed: 4 };
      const whole = await client.chat.completions.create(body);
      const stream = client.chat.completions.stream(body);
      const argumentDeltas: string[] = [];
      stream.on('tool_calls.function.arguments.delta', (event) => argumentDeltas.push(event.arguments_delta));
      const final = await stream.finalChatCompletion();
      const calls = final.choices[0].message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
      expect(final.choices[0].finish_reason).toBe('tool_calls');
      expect(calls.map((toolCall) => [toolCall.function.name, toolCall.function.arguments]))
        .toEqual((whole.choices[0].message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[]).map((toolCall) => [toolCall.function.name, toolCall.function.arguments]));
      expect(calls.every((toolCall) => /^call_/.test(toolCall.id))).toBe(true);
      expect(WeatherArgs.parse((calls[0].function as { parsed_arguments?: unknown }).parsed_arguments)).toEqual(JSON.parse(calls[0].function.arguments));
      expect(argumentDeltas.length).toBeGreaterThan(2);
    });

    it('runs a two-step agent loop: a tool call, its result, then the structured final answer', async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: 'What should I cook given the weather? Use get_weather.' }];
      const first = await client.chat.completions.parse({ model, messages, tools, response_format: zodResponseFormat(Recipe, 'recipe'), max_tokens: 500 });
      const message = first.choices[0].message;
      expect(message.tool_calls).toHaveLength(1);
      messages.push(message as OpenAI.ChatCompletionMessageParam);
      for (const toolCall of message.tool_calls!) messages.push({ role: 'tool', tool_call_id: toolCall.id, content: JSON.stringify({ temperature: 12 }) });
      const second = await client.chat.completions.parse({ model, messages, tools, response_format: zodResponseFormat(Recipe, 'recipe'), max_tokens: 500 });
      expect(second.choices[0].finish_reason).toBe('stop');
      expect(second.choices[0].message.tool_calls ?? []).toHaveLength(0);
      expect(Recipe.safeParse(second.choices[0].message.parsed).success).toBe(true);
    });

    it('logprobs: one entry per completion token, whole and streamed', async () => {
      const body = { model, messages: [{ role: 'user' as const, content: 'Say something' }], logprobs: true, top_logprobs: 2, max_tokens: 8, seed: 2 };
      const completion = await client.chat.completions.create(body);
      const entries = completion.choices[0].logprobs!.content!;
      expect(entries).toHaveLength(completion.usage!.completion_tokens);
      expect(entries.map((entry) => entry.token).join('')).toBe(completion.choices[0].message.content);
      expect(entries.every((entry) => entry.logprob < 0 && entry.top_logprobs.length === 2)).toBe(true);
      const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
      for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
      expect(streamed).toEqual(entries);
    });

    it('refuses bad tools and formats with a 400 naming the field', async () => {
      const refused = async (extra: Record<string, unknown>) => {
        const error = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], ...extra } as never).then(() => null, (caught: unknown) => caught);
        expect(error).toBeInstanceOf(OpenAI.BadRequestError);
        return (error as InstanceType<typeof OpenAI.BadRequestError>).param;
      };
      expect(await refused({ tools: [{ type: 'function', function: { name: 'bad name!' } }] })).toBe('tools[0].function.name');
      expect(await refused({ tool_choice: 'required' })).toBe('tool_choice');
      expect(await refused({ tools, tool_choice: { type: 'function', function: { name: 'missing' } } })).toBe('tool_choice.function.name');
      expect(await refused({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', not: {} } } } })).toBe('response_format.json_schema.schema.not');
      expect(await refused({ top_logprobs: 3 })).toBe('top_logprobs');
    });
  });

  describe('LangChain', () => {
    const chat = () => new ChatOpenAI({ model, apiKey, configuration: { baseURL }, maxRetries: 0, maxTokens: 500, useResponsesApi: false });

    it('withStructuredOutput: jsonSchema and functionCalling return objects the schema accepts', async () => {
      for (const method of ['jsonSchema', 'functionCalling'] as const) {
        const recipe = await chat().withStructuredOutput(Recipe, { method, name: 'recipe' }).invoke('A recipe for bread');
        expect({ method, ok: Recipe.safeParse(recipe).success }).toEqual({ method, ok: true });
      }
    });

    it('bindTools returns tool calls, and the loop ends with a text answer after the tool result', async () => {
      const weather = tool(async ({ city }) => `sunny in ${city}`, { name: 'get_weather', description: 'The weather in a city', schema: WeatherArgs });
      const model_ = chat().bindTools([weather]);
      const question = new HumanMessage('How is the weather in Lisbon?');
      const first = await model_.invoke([question]);
      expect(first.tool_calls).toHaveLength(1);
      expect(first.tool_calls![0].name).toBe('get_weather');
      expect(WeatherArgs.safeParse(first.tool_calls![0].args).success).toBe(true);
      const result = await weather.invoke(first.tool_calls![0]);
      const second = await model_.invoke([question, first, result as ToolMessage]);
      expect(second.tool_calls ?? []).toHaveLength(0);
      expect(typeof second.content).toBe('string');
      expect((second.content as string).length).toBeGreaterThan(0);
    });
  });
});
