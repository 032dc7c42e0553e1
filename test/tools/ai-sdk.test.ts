/**
 * The Vercel AI SDK's chat-completions provider through the platform on the built-in CPU engine:
 * generateObject, toolChoice "required", and a tool loop that ends in text. The SDK is ES
 * modules only, so its flows run in their own Node process (ai-sdk-flows.mjs) against the
 * test server; this process only starts the server and checks what they printed.
 */
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { deploymentForSuite } from '../support/test-server';

describe('Vercel AI SDK (openai.chat) on the built-in CPU engine', () => {
  const served = deploymentForSuite();

  it('generateObject, toolChoice "required" and a tool loop work unchanged', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [path.join(__dirname, 'ai-sdk-flows.mjs')], {
      env: { ...process.env, BASE_URL: served.deployment.baseUrl, API_KEY: served.workspace.apiKey, MODEL: served.modelId }, encoding: 'utf8',
    });
    const flows = JSON.parse(stdout.trim().split('\n').pop()!);
    expect(flows.objectFinish).toBe('stop');
    expect(flows.object).toEqual({ title: expect.any(String), servings: expect.any(Number), tags: expect.any(Array) });
    expect(flows.required).toEqual({ calls: [{ name: 'weather', input: { city: expect.any(String) } }], results: 1, finish: 'tool-calls' });
    expect(flows.loop).toEqual({ steps: 2, text: expect.stringMatching(/\.$/), finish: 'stop', calls: ['weather'] });
  });
});
