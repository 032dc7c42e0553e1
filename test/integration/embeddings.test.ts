import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startCpuEngineServer, type CpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { startTestServer, startWithDeployment, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

const BGE = 'BAAI/bge-large-en-v1.5';
const NOMIC = 'nomic-ai/nomic-embed-text-v1.5';

/** `/v1/embeddings` with the official SDK: client → gateway → gRPC → real agent (built-in CPU engine). */
describe('embeddings', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let embedding: { id: string; slug: string; baseUrl: string };
  let chat: { id: string; slug: string; baseUrl: string };
  let client: OpenAI;

  beforeAll(async () => {
    test = await startTestServer();
    workspace = await test.createWorkspace();
    embedding = await test.createDeployment(workspace, { modelId: BGE });
    chat = await test.createDeployment(workspace);
    await test.waitForReplicas(embedding.id, 1);
    await test.waitForReplicas(chat.id, 1);
    client = new OpenAI({ baseURL: embedding.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('embeds one string as a unit vector of the model\'s dimension, with usage and rate-limit headers', async () => {
    const input = 'The quick brown fox jumps over the lazy dog.';
    const { data: answer, response } = await client.embeddings.create({ model: BGE, input, encoding_format: 'float' }).withResponse();
    expect(answer.object).toBe('list');
    expect(answer.data).toHaveLength(1);
    expect(answer.data[0]).toMatchObject({ object: 'embedding', index: 0 });
    const vector = answer.data[0].embedding;
    expect(vector).toHaveLength(1024);
    expect(norm(vector)).toBeCloseTo(1, 5);
    expect(answer.usage).toEqual({ prompt_tokens: countTokens(input), total_tokens: countTokens(input) });
    expect(Number(response.headers.get('x-ratelimit-remaining'))).toBeGreaterThanOrEqual(0);
    expect(response.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
  });

  it('gives the same input the same vector and different inputs different ones; model may be omitted', async () => {
    const first = await client.embeddings.create({ input: ['alpha', 'beta', 'alpha'], encoding_format: 'float' });
    const again = await client.embeddings.create({ model: BGE, input: 'alpha', encoding_format: 'float' });
    expect(first.data[0].embedding).toEqual(first.data[2].embedding);
    expect(again.data[0].embedding).toEqual(first.data[0].embedding);
    expect(first.data[1].embedding).not.toEqual(first.data[0].embedding);
  });

  it('decodes base64 (the SDK default, and asked for explicitly) to exactly the float vectors', async () => {
    const input = ['one input', 'and another one'];
    const floats = await client.embeddings.create({ input, encoding_format: 'float' });
    const sdkDefault = await client.embeddings.create({ input });
    expect(sdkDefault.data.map((item) => item.embedding)).toEqual(floats.data.map((item) => item.embedding));
    const raw = await client.embeddings.create({ input, encoding_format: 'base64' });
    // A copy of exactly the decoded bytes: a small Buffer is a view into a shared pool (Node 24's
    // base64 decoding uses it where Node 20's did not), so its .buffer holds other bytes too.
    const decoded = raw.data.map((item) => Array.from(new Float32Array(new Uint8Array(Buffer.from(item.embedding as unknown as string, 'base64')).buffer)));
    expect(decoded).toEqual(floats.data.map((item) => item.embedding));
  });

  it('splits a large batch into engine-sized jobs and keeps the input order and the usage', async () => {
    const inputs = Array.from({ length: 150 }, (_, index) => `document number ${index} about topic ${index % 7}`);
    const batch = await client.embeddings.create({ input: inputs, encoding_format: 'float' });
    expect(batch.data.map((item) => item.index)).toEqual(inputs.map((_, index) => index));
    for (const index of [0, 63, 64, 127, 149]) {
      const alone = await client.embeddings.create({ input: inputs[index], encoding_format: 'float' });
      expect(batch.data[index].embedding).toEqual(alone.data[0].embedding);
    }
    const tokens = inputs.reduce((sum, input) => sum + countTokens(input), 0);
    expect(batch.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
  });

  it('embeds token ids, one array or several', async () => {
    const one = await client.embeddings.create({ input: [1, 2, 3], encoding_format: 'float' });
    expect(one.data).toHaveLength(1);
    expect(one.usage.prompt_tokens).toBe(3);
    const many = await client.embeddings.create({ input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
    expect(many.data).toHaveLength(2);
    expect(many.data[0].embedding).toEqual(one.data[0].embedding);
    expect(many.usage.prompt_tokens).toBe(5);
  });

  it('refuses inputs over the model\'s 512 input tokens with a 400 naming the limit, never truncating', async () => {
    const long = Array.from({ length: 513 }, (_, index) => `w${index}`).join(' ');
    await expectBadRequest(client.embeddings.create({ input: long }), 'input[0]', /513 tokens.*limit of 512 input tokens/);
    const inputs = Array.from({ length: 100 }, (_, index) => (index === 70 ? long : `short ${index}`));
    await expectBadRequest(client.embeddings.create({ input: inputs }), 'input[70]', /input\[70\] is 513 tokens.*512/);
    await expectBadRequest(client.embeddings.create({ input: Array.from({ length: 513 }, (_, index) => index) }), 'input', /513 tokens.*512/);
    await expectBadRequest(client.embeddings.create({ input: [[1], Array.from({ length: 600 }, () => 7)] }), 'input[1]', /600 tokens.*512/);
  });

  it.each([
    ['no input', {}, 'input'],
    ['an empty string', { input: '' }, 'input'],
    ['an empty array', { input: [] }, 'input'],
    ['an empty string among others', { input: ['a', ''] }, 'input[1]'],
    ['mixed strings and numbers', { input: ['a', 5] }, 'input[1]'],
    ['a number', { input: 5 }, 'input'],
    ['an object', { input: { text: 'a' } }, 'input'],
    ['a negative token id', { input: [1, -2] }, 'input[1]'],
    ['an empty token array', { input: [[1], []] }, 'input[1]'],
    ['too many items', { input: Array.from({ length: 2049 }, () => 'x') }, 'input'],
    ['an unknown encoding_format', { input: 'a', encoding_format: 'hex' }, 'encoding_format'],
    ['dimensions on a model without Matryoshka vectors', { input: 'a', dimensions: 256 }, 'dimensions'],
    ['a user that is not a string', { input: 'a', user: 5 }, 'user'],
    ['a different model', { input: 'a', model: 'intfloat/multilingual-e5-large' }, 'model'],
  ])('answers 400 naming the field for %s', async (_what, body, param) => {
    const response = await post(`${embedding.baseUrl}/embeddings`, body);
    expect(response.status).toBe(400);
    const error = ((await response.json()) as { error: { param: string; message: string; type: string } }).error;
    expect(error.param).toBe(param);
    expect(error.type).toBe('invalid_request_error');
    expect(error.message).toContain(param.replace(/\[\d+\]$/, ''));
  });

  it('answers chat and completion calls on an embedding deployment with the endpoints it serves, and the reverse', async () => {
    const onEmbedding = await post(`${embedding.baseUrl}/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] });
    expect(onEmbedding.status).toBe(400);
    expect(((await onEmbedding.json()) as { error: { message: string } }).error.message).toMatch(/embedding model.*serves POST \/v1\/embeddings/);
    const completion = await post(`${embedding.baseUrl}/completions`, { prompt: 'hi' });
    expect(completion.status).toBe(400);
    const onChat = new OpenAI({ baseURL: chat.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const error = await onChat.embeddings.create({ input: 'hi' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).message).toMatch(/not an embedding model.*POST \/v1\/chat\/completions and POST \/v1\/completions/);
  });

  it('counts the tokens toward TPD and into usage records like chat', async () => {
    const limited = await test.createWorkspace({ tpdLimit: 20 });
    const deployment = await test.createDeployment(limited, { modelId: BGE });
    await test.waitForReplicas(deployment.id, 1);
    const limitedClient = new OpenAI({ baseURL: deployment.baseUrl, apiKey: limited.apiKey, maxRetries: 0 });
    const input = Array.from({ length: 25 }, (_, index) => `t${index}`).join(' ');
    const first = await limitedClient.embeddings.create({ input });
    expect(first.usage.total_tokens).toBe(25);
    const over = await limitedClient.embeddings.create({ input: 'more' }).catch((caught: unknown) => caught);
    expect(over).toBeInstanceOf(OpenAI.RateLimitError);
    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { apiKeyId: limited.apiKeyId, endpoint: 'embeddings' } })) > 0, 5_000, 'an embeddings usage record');
    const [record] = await records.find({ where: { apiKeyId: limited.apiKeyId, endpoint: 'embeddings' } });
    expect(record).toMatchObject({ status: 'succeeded', promptTokens: 25, completionTokens: 0, totalTokens: 25, deploymentId: deployment.id });
  });

  it('answers vectors of the requested size on a Matryoshka model, within its range', async () => {
    const deployment = await test.createDeployment(workspace, { modelId: NOMIC });
    await test.waitForReplicas(deployment.id, 1);
    const nomic = new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const full = await nomic.embeddings.create({ input: 'search_query: vectors' });
    expect(full.data[0].embedding).toHaveLength(768);
    const short = await nomic.embeddings.create({ input: 'search_query: vectors', dimensions: 256 });
    expect(short.data[0].embedding).toHaveLength(256);
    expect(norm(short.data[0].embedding)).toBeCloseTo(1, 5);
    await expectBadRequest(nomic.embeddings.create({ input: 'a', dimensions: 32 }), 'dimensions', /from 64 to 768/);
  });

  it('shows the embedding models\' vectors and limits in the GraphQL catalog', async () => {
    const response = await post(`${test.url}/graphql`, { query: '{ catalog { id task embedding { dimensions maxInputTokens minDimensions maxBatchInputs } } }' });
    const { catalog } = ((await response.json()) as { data: { catalog: Array<{ id: string; task: string; embedding: unknown }> } }).data;
    expect(catalog.find((model) => model.id === BGE)).toEqual({ id: BGE, task: 'embedding', embedding: { dimensions: 1024, maxInputTokens: 512, minDimensions: null, maxBatchInputs: 64 } });
    expect(catalog.find((model) => model.id === NOMIC)!.embedding).toMatchObject({ dimensions: 768, minDimensions: 64 });
    expect(catalog.filter((model) => model.task !== 'embedding').every((model) => model.embedding === null)).toBe(true);
  });

  async function post(url: string, body: unknown): Promise<Response> {
    return await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  }
});

/** The `openai` adapter in front of an HTTP engine serving `/v1/embeddings` (as vLLM `--task embed` or TEI would). */
describe('embeddings through the openai engine adapter', () => {
  let engine: CpuEngineServer;
  let test: TestServer;
  let client: OpenAI;
  const received: Array<{ path: string; body: Record<string, unknown> }> = [];

  beforeAll(async () => {
    engine = await startCpuEngineServer({ onRequest: (path, body) => received.push({ path, body }), embedding: { dimensions: 1024, maxInputTokens: 512 } });
    ({ test, client } = await startWithDeployment({ controlPlane: { localEngine: 'openai', localEngineUrl: engine.url }, deployment: { modelId: BGE } }));
  });

  afterAll(async () => {
    await test?.stop();
    await engine?.close();
  });

  it('passes the body through (user and unknown fields included) and the answer back', async () => {
    const answer = await client.embeddings.create({
      input: ['pass', 'through'], encoding_format: 'float', user: 'u-7',
      // @ts-expect-error a field the SDK does not know must reach the engine too
      truncate_prompt_tokens: 0,
    });
    expect(answer.data.map((item) => item.index)).toEqual([0, 1]);
    expect(answer.data[0].embedding).toHaveLength(1024);
    expect(answer.usage).toEqual({ prompt_tokens: 2, total_tokens: 2 });
    expect(received.at(-1)).toEqual({
      path: '/v1/embeddings',
      body: { input: ['pass', 'through'], encoding_format: 'float', user: 'u-7', truncate_prompt_tokens: 0, model: BGE },
    });
  });

  it('splits a large batch across engine calls and reassembles it in order', async () => {
    const before = received.length;
    const inputs = Array.from({ length: 130 }, (_, index) => `item ${index}`);
    const answer = await client.embeddings.create({ input: inputs, encoding_format: 'float' });
    expect(answer.data.map((item) => item.index)).toEqual(inputs.map((_, index) => index));
    const calls = received.slice(before);
    expect(calls.map((call) => (call.body.input as string[]).length).sort((left, right) => left - right)).toEqual([2, 64, 64]);
    const last = await client.embeddings.create({ input: inputs[129], encoding_format: 'float' });
    expect(answer.data[129].embedding).toEqual(last.data[0].embedding);
  });

  it('returns the engine\'s own 400 for an over-long input', async () => {
    const long = Array.from({ length: 600 }, (_, index) => `w${index}`).join(' ');
    await expectBadRequest(client.embeddings.create({ input: long }), 'input', /600 tokens.*512/);
  });
});

async function expectBadRequest(call: Promise<unknown>, param: string, message: RegExp): Promise<void> {
  const error = await call.catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(OpenAI.BadRequestError);
  const badRequest = error as InstanceType<typeof OpenAI.BadRequestError>;
  expect(badRequest.param).toBe(param);
  expect(badRequest.message).toMatch(message);
}

function norm(vector: number[]): number {
  return Math.sqrt(vector.reduce((sum, value) => sum + value * value, 0));
}
