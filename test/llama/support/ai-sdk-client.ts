/**
 * The Vercel AI SDK (ESM only, which jest's CommonJS runtime cannot load) driven from a plain
 * Node process: `generateObject` and `generateText` with a required tool through its
 * chat-completions provider (`openai.chat`), against a deployment's base URL. Prints what the
 * SDK returned as one JSON line, for the test to check.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';

const ROOT = path.resolve(__dirname, '../../..');

const SCRIPT = `
import { createOpenAI } from '@ai-sdk/openai';
import { generateObject, generateText, tool } from 'ai';
import { z } from 'zod';
const provider = createOpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY });
const model = provider.chat(process.env.MODEL);
const object = await generateObject({
  model, seed: 3, prompt: 'Rate the weather',
  schema: z.object({ title: z.string().max(20), score: z.int(), flags: z.array(z.boolean()).max(3) }),
});
const text = await generateText({
  model, seed: 3, prompt: 'Weather in Oslo?', toolChoice: 'required',
  tools: { get_weather: tool({ description: 'Forecast', inputSchema: z.object({ city: z.string(), days: z.int() }) }) },
});
process.stdout.write(JSON.stringify({ object: object.object, toolCalls: text.toolCalls.map((call) => ({ name: call.toolName, input: call.input })), finishReason: text.finishReason }) + '\\n');
`;

export interface AiSdkAnswers {
  readonly object: unknown;
  readonly toolCalls: Array<{ name: string; input: unknown }>;
  readonly finishReason: string;
}

export function runAiSdk(baseUrl: string, apiKey: string, model: string): Promise<AiSdkAnswers> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', SCRIPT], { cwd: ROOT, env: { PATH: process.env.PATH, BASE_URL: baseUrl, API_KEY: apiKey, MODEL: model } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => { stdout += data.toString(); });
    child.stderr.on('data', (data: Buffer) => { stderr += data.toString(); });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(stdout)) : reject(new Error(`AI SDK client exited with ${code}: ${stderr}`))));
  });
}
