/**
 * Issue 34, part 6: the clients people start with today, unchanged, at their current versions,
 * against the built-in CPU engine: the OpenAI Agents SDK and the Vercel AI SDK's default
 * `openai()` provider, both of which speak only the Responses API. Each runs its own flow to the
 * end (an agent loop with a function tool; generateText with tools; generateObject), so a field
 * they send that we ignore or refuse, or a shape they cannot read, fails here.
 */
import OpenAI from 'openai';
import { z } from 'zod';
import { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool as agentTool } from '@openai/agents';
import { generateObject, generateText, stepCountIs, tool } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { deploymentForSuite } from '../support/test-server';

describe('stock clients on /v1/responses (CPU engine)', () => {
  const served = deploymentForSuite();
  /** What each client is built with: the deployment's base URL and the workspace's key. */
  const options = () => ({ apiKey: served.workspace.apiKey, baseURL: served.deployment.baseUrl });
  let model: string;

  beforeAll(async () => {
    model = (await new OpenAI(options()).models.list()).data[0].id;
  });

  it('@openai/agents: an agent with a function tool calls it and runs to its final output', async () => {
    setDefaultOpenAIClient(new OpenAI(options()));
    setOpenAIAPI('responses');
    setTracingDisabled(true);
    const calls: string[] = [];
    const getWeather = agentTool({
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push(city);
        return `sunny in ${city}`;
      },
    });
    const agent = new Agent({ name: 'Forecaster', instructions: 'Answer with the get_weather tool.', tools: [getWeather], model });
    const result = await run(agent, 'What is the weather in Paris? Use get_weather.');
    expect(calls).toHaveLength(1);
    expect(typeof calls[0]).toBe('string');
    expect(typeof result.finalOutput).toBe('string');
    expect((result.finalOutput as string).length).toBeGreaterThan(0);
  });

  it('@openai/agents: an agent with an output type returns a parsed object', async () => {
    setDefaultOpenAIClient(new OpenAI(options()));
    setTracingDisabled(true);
    const Person = z.object({ name: z.string(), age: z.number().int() });
    const agent = new Agent({ name: 'Extractor', instructions: 'Extract the person.', outputType: Person, model });
    const result = await run(agent, 'Ada is 36.');
    expect(Person.safeParse(result.finalOutput).success).toBe(true);
  });

  it('AI SDK openai(): generateText with tools runs the tool and ends with text', async () => {
    const openai = createOpenAI(options());
    const calls: string[] = [];
    const result = await generateText({
      model: openai(model),
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: z.object({ city: z.string() }),
          execute: async ({ city }) => {
            calls.push(city);
            return `sunny in ${city}`;
          },
        }),
      },
      stopWhen: stepCountIs(3),
      prompt: 'What is the weather in Paris? Use get_weather.',
    });
    expect(calls).toHaveLength(1);
    expect(result.steps.length).toBe(2);
    expect(result.steps[0].toolCalls.map((call) => call.toolName)).toEqual(['get_weather']);
    expect(result.text.length).toBeGreaterThan(0);
  });

  it("AI SDK openai(): toolChoice 'required' gets a tool call", async () => {
    const openai = createOpenAI(options());
    const result = await generateText({
      model: openai(model),
      tools: { lookup: tool({ description: 'Look a word up', inputSchema: z.object({ word: z.string() }) }) },
      toolChoice: 'required',
      prompt: 'hello',
    });
    expect(result.toolCalls.map((call) => call.toolName)).toEqual(['lookup']);
    expect(typeof (result.toolCalls[0].input as { word: unknown }).word).toBe('string');
  });

  it('AI SDK openai(): generateObject returns an object that satisfies the schema', async () => {
    const openai = createOpenAI(options());
    const schema = z.object({ title: z.string(), tags: z.array(z.string()), rating: z.number().min(1).max(5) });
    const { object } = await generateObject({ model: openai(model), schema, prompt: 'Review a film.' });
    expect(schema.safeParse(object).success).toBe(true);
  });
});
