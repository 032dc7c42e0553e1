/**
 * Behind the `openai` adapter (as in front of vLLM; the engine here is the CPU engine over HTTP),
 * a deployment whose catalog model states no tool-call parser refuses `tools` with our 400
 * naming the field, and the engine never sees the request; a model with a parser passes them on.
 */
import OpenAI from 'openai';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { startTestServer, type TestServer } from '../support/test-server';

const WITH_PARSER = 'meta-llama/Llama-3.1-8B-Instruct';
const WITHOUT_PARSER = 'Qwen/Qwen2.5-VL-7B-Instruct';
const tools = [{ type: 'function' as const, function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] } } }];

describe('tools on a vLLM model without a tool-call parser', () => {
  let engine: CpuEngineServer;
  let test: TestServer;
  const received: Array<{ path: string; body: Record<string, unknown> }> = [];
  const clients: Record<string, OpenAI> = {};

  beforeAll(async () => {
    engine = await startCpuEngineServer({ onRequest: (path, body) => received.push({ path, body }) });
    test = await startTestServer({ controlPlane: { localEngine: 'openai', localEngineUrl: engine.url } });
    const workspace = await test.createWorkspace();
    for (const modelId of [WITH_PARSER, WITHOUT_PARSER]) {
      const deployment = await test.createDeployment(workspace, { modelId });
      await test.waitForReplicas(deployment.id, 1);
      clients[modelId] = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    }
  });

  afterAll(async () => {
    await test?.stop();
    await engine?.close();
  });

  it('refuses tools and tool_choice with a 400 naming the field, before the engine', async () => {
    const before = received.length;
    const client = clients[WITHOUT_PARSER];
    const messages = [{ role: 'user' as const, content: 'look it up' }];
    for (const [extra, param] of [[{ tools }, 'tools'], [{ tools, tool_choice: 'required' }, 'tools'], [{ tool_choice: 'auto' }, 'tool_choice']] as const) {
      const error = await client.chat.completions.create({ model: WITHOUT_PARSER, messages, max_tokens: 4, ...extra } as never).then(() => null, (caught: unknown) => caught);
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe(param);
      expect((error as Error).message).toContain('tool-call parser');
    }
    expect(received.length).toBe(before);
    // tool_choice "none" and structured outputs still reach it.
    await client.chat.completions.create({ model: WITHOUT_PARSER, messages, tools, tool_choice: 'none', max_tokens: 4 });
    await client.chat.completions.create({ model: WITHOUT_PARSER, messages, response_format: { type: 'json_object' }, max_tokens: 40 });
    expect(received.length).toBe(before + 2);
  });

  it('passes tools on to the engine of a model with a parser', async () => {
    const completion = await clients[WITH_PARSER].chat.completions.create({ model: WITH_PARSER, messages: [{ role: 'user', content: 'lookup please' }], tools, max_tokens: 50 });
    expect(received.at(-1)!.body).toMatchObject({ tools });
    expect(completion.choices[0].message.tool_calls![0]).toMatchObject({ type: 'function', function: { name: 'lookup' } });
  });
});
