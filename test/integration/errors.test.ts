import OpenAI from 'openai';
import { deploymentForSuite } from '../support/test-server';

interface ErrorBody { error: { message: string; type: string; param: string | null; code: string } }

/** Every row of the chat/completions error table (docs/api-contract.md#chat-and-completions), and bad input naming the field. */
describe('chat/completions errors', () => {

  const post = async (path: string, body: unknown, key = served.workspace.apiKey, baseUrl = served.deployment.baseUrl) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });
    return { status: response.status, headers: response.headers, body: (await response.json()) as ErrorBody };
  };

  const served = deploymentForSuite();

  const messages = [{ role: 'user', content: 'hi' }];

  it('400 when model differs from the endpoint model (SDK BadRequestError naming model)', async () => {
    const client = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: served.workspace.apiKey, maxRetries: 0 });
    const error = await client.chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] }).catch((caught) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect(error.status).toBe(400);
    expect(error.param).toBe('model');
    expect(error.code).toBe('model_mismatch');
    expect(error.message).toContain(served.modelId);
  });

  it('401 for a bad, missing or malformed key', async () => {
    const client = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: 'mk-not-a-real-key', maxRetries: 0 });
    await expect(client.chat.completions.create({ model: served.modelId, messages: [{ role: 'user', content: 'hi' }] })).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const missing = await fetch(`${served.deployment.baseUrl}/chat/completions`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as ErrorBody).error.type).toBe('authentication_error');
    expect((await post('/chat/completions', { messages }, 'sk-other-format')).status).toBe(401);
  });

  it('402 insufficient_quota when the workspace credit is used up', async () => {
    // Prepaid with nothing: its balance (0) and its ledger (no rows) agree.
    const opened = await served.test.server.controlPlane.workspaceAdmin.create('broke', '0');
    const broke = { workspaceId: opened.workspace.id, apiKey: opened.plaintext, apiKeyId: opened.apiKey.id };
    await served.test.server.controlPlane.workspaceBudgets.set(broke.workspaceId, 'local_replicas', 'workspace', 1);
    const brokeDeployment = await served.test.createDeployment(broke);
    const result = await post('/chat/completions', { messages }, broke.apiKey, brokeDeployment.baseUrl);
    expect(result.status).toBe(402);
    expect(result.body.error.code).toBe('insufficient_quota');
    await served.test.server.controlPlane.deployments.delete(broke.workspaceId, brokeDeployment.id);
  });

  it('404 for an unknown endpoint, another workspace\'s deployment, or an unknown path', async () => {
    const unknown = await post('/chat/completions', { messages }, served.workspace.apiKey, `${served.test.url}/d/no-such-deployment/v1`);
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('deployment_not_found');
    const other = await served.test.createWorkspace();
    const foreign = await post('/chat/completions', { messages }, other.apiKey);
    expect(foreign.status).toBe(404);
    const wrongPath = await post('/audio/speech', { input: 'x' });
    expect(wrongPath.status).toBe(404);
    const client = new OpenAI({ baseURL: served.deployment.baseUrl, apiKey: served.workspace.apiKey, maxRetries: 0 });
    await expect(client.models.retrieve('gpt-4o')).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    // The workspace base URL (/v1) answers, and asks which deployment: `model` (workspace-base-url.test.ts).
    const root = await fetch(`${served.test.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}` }, body: '{}' });
    expect(root.status).toBe(400);
    expect((await root.json()).error.param).toBe('model');
    const rootUnknown = await fetch(`${served.test.url}/v1/audio/speech`, { method: 'POST', headers: { authorization: `Bearer ${served.workspace.apiKey}` }, body: '{}' });
    expect(rootUnknown.status).toBe(404);
  });

  it('503 when the deployment is paused (saying so) or has no ready replica', async () => {
    const own = await served.test.createWorkspace();
    const paused = await served.test.createDeployment(own);
    await served.test.waitForReplicas(paused.id, 1);
    await served.test.server.controlPlane.deployments.pause(own.workspaceId, paused.id);
    const pausedResult = await post('/chat/completions', { messages }, own.apiKey, paused.baseUrl);
    expect(pausedResult.status).toBe(503);
    expect(pausedResult.body.error.code).toBe('deployment_paused');
    expect(pausedResult.body.error.message).toMatch(/paused/);
    expect(served.test.server.controlPlane.dispatcher.readyReplicas(paused.id)).toBe(0);

    const external = await served.test.createDeployment(own, { provider: 'external' });
    const noReplica = await post('/chat/completions', { messages }, own.apiKey, external.baseUrl);
    expect(noReplica.status).toBe(503);
    expect(noReplica.body.error.code).toBe('no_replica_available');
    expect(noReplica.headers.get('retry-after')).toBeTruthy();
  });

  it('400 for a chat call on a base completion model', async () => {
    const own = await served.test.createWorkspace();
    const base = await served.test.createDeployment(own, { modelId: 'Qwen/Qwen2.5-7B', provider: 'external' });
    const result = await post('/chat/completions', { messages }, own.apiKey, base.baseUrl);
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe('unsupported_endpoint');
  });

  const badChatBodies: Array<[string, unknown, string | null, string]> = [
    ['malformed JSON', '{"messages": [', null, 'invalid_json'],
    ['a JSON array', '[1,2]', null, 'invalid_request'],
    ['missing messages', { model: undefined }, 'messages', 'invalid_request'],
    ['messages not an array', { messages: 'hi' }, 'messages', 'invalid_request'],
    ['empty messages', { messages: [] }, 'messages', 'invalid_request'],
    ['message without role', { messages: [{ content: 'hi' }] }, 'messages[0].role', 'invalid_request'],
    ['message that is a string', { messages: ['hi'] }, 'messages[0]', 'invalid_request'],
    ['temperature as string', { messages, temperature: 'hot' }, 'temperature', 'invalid_request'],
    ['temperature out of range', { messages, temperature: 3 }, 'temperature', 'invalid_request'],
    ['top_p out of range', { messages, top_p: 1.5 }, 'top_p', 'invalid_request'],
    ['max_tokens zero', { messages, max_tokens: 0 }, 'max_tokens', 'invalid_request'],
    ['max_tokens fractional', { messages, max_tokens: 1.5 }, 'max_tokens', 'invalid_request'],
    ['n zero', { messages, n: 0 }, 'n', 'invalid_request'],
    ['stop as number', { messages, stop: 5 }, 'stop', 'invalid_request'],
    ['stop with 5 entries', { messages, stop: ['a', 'b', 'c', 'd', 'e'] }, 'stop', 'invalid_request'],
    ['stream as string', { messages, stream: 'yes' }, 'stream', 'invalid_request'],
    ['stream_options without stream', { messages, stream_options: { include_usage: true } }, 'stream_options', 'invalid_request'],
    ['presence_penalty as string', { messages, presence_penalty: 'x' }, 'presence_penalty', 'invalid_request'],
    ['model as number', { messages, model: 7 }, 'model', 'invalid_request'],
  ];

  it.each(badChatBodies)('chat: %s is a 400 naming the field', async (_name, body, param, code) => {
    const result = await post('/chat/completions', body);
    expect(result.status).toBe(400);
    expect(result.body.error.code).toBe(code);
    expect(result.body.error.param).toBe(param);
    expect(result.body.error.type).toBe('invalid_request_error');
    if (param) expect(result.body.error.message).toContain(param.split('[')[0]);
  });

  const badCompletionBodies: Array<[string, unknown, string]> = [
    ['missing prompt', {}, 'prompt'],
    ['prompt as number', { prompt: 5 }, 'prompt'],
    ['prompt as empty array', { prompt: [] }, 'prompt'],
    ['mixed prompt array', { prompt: ['a', 1] }, 'prompt'],
    ['max_tokens negative', { prompt: 'x', max_tokens: -1 }, 'max_tokens'],
  ];

  it.each(badCompletionBodies)('completions: %s is a 400 naming the field', async (_name, body, param) => {
    const result = await post('/completions', body);
    expect(result.status).toBe(400);
    expect(result.body.error.param).toBe(param);
  });

  it('413 for a body over the size limit, without reading it all', async () => {
    const huge = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(5 * 1024 * 1024) }] });
    const result = await post('/chat/completions', huge);
    expect(result.status).toBe(413);
    expect(result.body.error.code).toBe('body_too_large');
    expect(result.body.error.message).toContain('4194304');
  });
});
