// The Vercel AI SDK's chat-completions provider (`openai.chat`) against a base URL, run as its own
// process: the AI SDK is published as ES modules only, which jest's CommonJS runtime cannot load.
// Prints one JSON line with what each flow returned (test/tools/ai-sdk.test.ts asserts on it).
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, tool, stepCountIs } from 'ai';
import { z } from 'zod';

const { BASE_URL: baseURL, API_KEY: apiKey, MODEL: model } = process.env;
const provider = createOpenAI({ baseURL, apiKey });
const chat = provider.chat(model);
const Recipe = z.object({ title: z.string(), servings: z.number().int().min(1).max(8), tags: z.array(z.enum(['quick', 'vegan', 'spicy'])).max(3) });
const weather = tool({
  description: 'The weather in a city',
  inputSchema: z.object({ city: z.string().min(2) }),
  execute: async ({ city }) => ({ city, temperature: 18 }),
});

const object = await generateObject({ model: chat, schema: Recipe, prompt: 'A recipe', maxOutputTokens: 300, maxRetries: 0 });
const required = await generateText({ model: chat, tools: { weather }, toolChoice: 'required', prompt: 'Weather in Rome?', maxOutputTokens: 200, maxRetries: 0 });
const loop = await generateText({ model: chat, tools: { weather }, stopWhen: stepCountIs(5), prompt: 'Use weather for Oslo', maxOutputTokens: 200, maxRetries: 0 });
process.stdout.write(`${JSON.stringify({
  object: object.object,
  objectFinish: object.finishReason,
  required: { calls: required.toolCalls.map((call) => ({ name: call.toolName, input: call.input })), results: required.toolResults.length, finish: required.finishReason },
  loop: { steps: loop.steps.length, text: loop.text, finish: loop.finishReason, calls: loop.steps.flatMap((step) => step.toolCalls.map((call) => call.toolName)) },
})}\n`);
