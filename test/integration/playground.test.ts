import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';

interface ChatEvent { requestId: string; content: string; done: boolean; finishReason: string | null; toolCalls: string | null; promptTokens: number | null; completionTokens: number | null }
interface GraphQLError { message: string; extensions?: { code?: string; param?: string } }

const CHAT = `subscription ($input: PlaygroundChatInput!) {
  playgroundChat(input: $input) { requestId content done finishReason toolCalls promptTokens completionTokens }
}`;

/**
 * The console's playground over GraphQL against a real server and agents: a chat runs as the
 * chosen key of the workspace through the same pipeline as /v1 (streamed, with tools and
 * structured output; billed, rate-limited and recorded under that key), bad input is
 * BAD_USER_INPUT naming the field, a revoked key or another workspace's key or deployment is
 * refused, and an image deployment makes an image.
 */
describe('the playground over GraphQL', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let chatDeployment: { id: string };
  let playgroundKeyId: string;
  const clients: Client[] = [];

  beforeAll(async () => {
    // 100 tokens a second: an answer comes in several pieces, as from a real model.
    test = await startTestServer({ controlPlane: { localAgentEnv: { WORKER_CPU_TOKENS_PER_SECOND: '100' } } });
    workspace = await test.createWorkspace();
    playgroundKeyId = (await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'playground key')).apiKey.id;
    chatDeployment = await test.createDeployment(workspace);
    await test.waitForReplicas(chatDeployment.id, 1);
  });

  afterAll(async () => {
    await Promise.all(clients.map((client) => client.dispose()));
    await test?.stop();
  });

  /** Runs one playground chat on a socket signed in with `apiKey`: its events, and the errors it ended with. */
  async function chat(input: Record<string, unknown>, apiKey = workspace.apiKey): Promise<{ events: ChatEvent[]; errors: GraphQLError[] }> {
    const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${apiKey}` } });
    clients.push(client);
    const events: ChatEvent[] = [];
    const errors: GraphQLError[] = [];
    await new Promise<void>((resolve) => {
      client.subscribe<{ playgroundChat: ChatEvent }>({ query: CHAT, variables: { input: { deploymentId: chatDeployment.id, apiKeyId: playgroundKeyId, ...input } } }, {
        next: (result) => {
          if (result.data) events.push(result.data.playgroundChat);
          if (result.errors) errors.push(...(result.errors as GraphQLError[]));
        },
        error: (error) => {
          errors.push(...(Array.isArray(error) ? error : [{ message: String(error) }]));
          resolve();
        },
        complete: resolve,
      });
    });
    return { events, errors };
  }

  const hello = [{ role: 'user', content: 'Say hello in a few words' }];

  async function requestsOf(keyId: string): Promise<number> {
    const rows = await test.server.controlPlane.billing.usage(workspace.workspaceId, new Date(Date.now() - 3_600_000), new Date(Date.now() + 60_000), 'api_key');
    return rows.find((row) => row.key === keyId)?.requests ?? 0;
  }

  it('streams a chat answer as the chosen key: text pieces, then the end with its tokens; the usage record names that key', async () => {
    const { events, errors } = await chat({ messages: hello, maxTokens: 24 });
    expect(errors).toEqual([]);
    const end = events[events.length - 1];
    expect(end).toMatchObject({ done: true, content: '', toolCalls: null });
    expect(['stop', 'length']).toContain(end.finishReason);
    expect(end.promptTokens).toBeGreaterThan(0);
    expect(end.completionTokens).toBeGreaterThan(0);
    const pieces = events.filter((event) => !event.done);
    expect(pieces.length).toBeGreaterThan(1);
    expect(pieces.map((event) => event.content).join('').length).toBeGreaterThan(0);
    expect(new Set(events.map((event) => event.requestId)).size).toBe(1);
    await waitFor(async () => (await requestsOf(playgroundKeyId)) === 1, 10_000, 'the usage record of the playground key');
    // The signed-in key only chose it: it made no request of its own.
    expect(await requestsOf(workspace.apiKeyId)).toBe(0);
  });

  it('a subscriber that leaves mid-answer lets the job go: it is metered for the tokens it made, not the ones it was allowed', async () => {
    const leaving = (await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'leaves early')).apiKey.id;
    const client = createClient({ url: `${test.url.replace('http', 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${workspace.apiKey}` } });
    clients.push(client);
    // 2,000 tokens at 100 a second would take 20 s.
    const subscription = client.iterate<{ playgroundChat: ChatEvent }>({ query: CHAT, variables: { input: { deploymentId: chatDeployment.id, apiKeyId: leaving, messages: hello, maxTokens: 2_000 } } });
    const first = await subscription.next();
    expect(first.value.data.playgroundChat.done).toBe(false);
    await subscription.return!();
    const usage = async () => (await test.server.controlPlane.billing.usage(workspace.workspaceId, new Date(Date.now() - 3_600_000), new Date(Date.now() + 60_000), 'api_key'))
      .find((row) => row.key === leaving);
    await waitFor(async () => (await usage()) !== undefined, 10_000, 'the left request metered');
    expect((await usage())!.completionTokens).toBeLessThan(2_000);
  });

  it('tools: a required call comes back whole with finish reason tool_calls; structured output follows the schema', async () => {
    const tools = JSON.stringify([{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }]);
    const called = await chat({ messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools, toolChoice: 'required' });
    expect(called.errors).toEqual([]);
    const end = called.events[called.events.length - 1];
    expect(end.finishReason).toBe('tool_calls');
    const calls = JSON.parse(end.toolCalls!) as Array<{ id: string; type: string; function: { name: string; arguments: string } }>;
    expect(calls).toHaveLength(1);
    expect(calls[0].function.name).toBe('get_weather');
    expect(typeof JSON.parse(calls[0].function.arguments).city).toBe('string');

    // The tool's result goes back as a tool message; the model then answers in text.
    const answered = await chat({
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }, { role: 'assistant', content: null, toolCalls: end.toolCalls }, { role: 'tool', toolCallId: calls[0].id, content: '{"celsius": 21}' }],
      tools,
    });
    expect(answered.errors).toEqual([]);
    expect(answered.events[answered.events.length - 1].finishReason).toBe('stop');

    const schema = JSON.stringify({ type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'integer' } }, required: ['city', 'celsius'], additionalProperties: false });
    const structured = await chat({ messages: [{ role: 'user', content: 'Weather in Paris as JSON' }], responseSchema: schema });
    expect(structured.errors).toEqual([]);
    const json = JSON.parse(structured.events.map((event) => event.content).join(''));
    expect(Object.keys(json).sort()).toEqual(['celsius', 'city']);
    expect(Number.isInteger(json.celsius)).toBe(true);
  });

  it('bad tools JSON, a bad tool, a bad schema and a model not served there are BAD_USER_INPUT naming the field, and nothing runs', async () => {
    const fresh = (await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'bad input')).apiKey.id;
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tools: '[{"type": "function"' }, 'tools'],
      [{ tools: '[{"type": "function", "function": {"name": "has spaces"}}]' }, 'tools[0].function.name'],
      [{ responseSchema: 'not json' }, 'responseSchema'],
      [{ responseSchema: '{"type": "object", "properties": {"x": {"type": "nonsense"}}}' }, 'responseSchema.properties.x.type'],
      [{ toolChoice: 'sometimes' }, 'toolChoice'],
      [{ maxTokens: 0 }, 'maxTokens'],
      // Neither the base model nor an adapter attached to the deployment (docs/adapters.md).
      [{ model: 'no-such-adapter' }, 'model'],
    ];
    for (const [input, param] of cases) {
      const { events, errors } = await chat({ messages: hello, apiKeyId: fresh, ...input });
      expect(events).toEqual([]);
      expect(errors.map((error) => [error.extensions?.code, error.extensions?.param])).toEqual([['BAD_USER_INPUT', param]]);
      expect(errors[0].message).toContain(param);
    }
    // A request that ran would be recorded within milliseconds (usageFlushIntervalMs 20).
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await requestsOf(fresh)).toBe(0);
  });

  it('is rate-limited as its key: past the key\'s RPM the next chat is RATE_LIMITED', async () => {
    const limited = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'one a minute', { rpmLimit: 1 });
    expect((await chat({ messages: hello, apiKeyId: limited.apiKey.id })).errors).toEqual([]);
    const refused = await chat({ messages: hello, apiKeyId: limited.apiKey.id });
    expect(refused.events).toEqual([]);
    expect(refused.errors.map((error) => error.extensions?.code)).toEqual(['RATE_LIMITED']);
  });

  it('a revoked key, another workspace\'s key and another workspace\'s deployment are refused', async () => {
    const revoked = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'to revoke');
    await test.server.controlPlane.apiKeys.revoke(workspace.workspaceId, revoked.apiKey.id);
    const other = await test.createWorkspace();
    const otherDeployment = await test.createDeployment(other, { provider: 'external' });
    const outcomes = [
      await chat({ messages: hello, apiKeyId: revoked.apiKey.id }),
      await chat({ messages: hello, apiKeyId: other.apiKeyId }),
      await chat({ messages: hello, deploymentId: otherDeployment.id }),
    ];
    expect(outcomes.map(({ events, errors }) => [events.length, errors.map((error) => [error.extensions?.code, error.extensions?.param])])).toEqual([
      [0, [['NOT_FOUND', 'apiKeyId']]],
      [0, [['NOT_FOUND', 'apiKeyId']]],
      [0, [['FORBIDDEN', expect.anything()]]],
    ]);
    expect(JSON.stringify(outcomes)).not.toContain(other.workspaceId);
  });

  it('an image deployment makes an image, billed as the key; a chat deployment is refused an image', async () => {
    const image = await test.createDeployment(workspace, { modelId: IMAGE_MODEL });
    await test.waitForReplicas(image.id, 1, 60_000);
    const mutation = 'mutation ($input: PlaygroundImageInput!) { playgroundImage(input: $input) { requestId urls } }';
    const call = async (deploymentId: string) => {
      const response = await fetch(`${test.url}/graphql`, {
        method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${workspace.apiKey}` },
        body: JSON.stringify({ query: mutation, variables: { input: { deploymentId, apiKeyId: playgroundKeyId, prompt: 'a lighthouse at dusk', size: '512x512' } } }),
      });
      return await response.json() as { data?: { playgroundImage: { requestId: string; urls: string[] } }; errors?: GraphQLError[] };
    };
    const made = await call(image.id);
    expect(made.errors).toBeUndefined();
    const { requestId, urls } = made.data!.playgroundImage;
    expect(urls).toHaveLength(1);
    const file = await fetch(urls[0]);
    expect(file.status).toBe(200);
    expect(file.headers.get('content-type')).toBe('image/png');
    const record = await test.server.controlPlane.requestRecords.find(requestId);
    expect(record).toMatchObject({ apiKeyId: playgroundKeyId, status: 'succeeded' });

    const refused = await call(chatDeployment.id);
    expect(refused.errors!.map((error) => error.extensions?.code)).toEqual(['BAD_USER_INPUT']);
  });
});
