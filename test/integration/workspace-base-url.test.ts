import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';
import { parsePrometheusText, sampleValue } from '../telemetry/support/prometheus-text';

const BGE = 'BAAI/bge-large-en-v1.5';
const EDIT_MODEL = 'black-forest-labs/FLUX.1-Kontext-dev';

type Created = { id: string; slug: string; baseUrl: string };

/**
 * The workspace base URL: one `new OpenAI({ baseURL: '<server>/v1' })`, deployments picked by
 * `model` (a slug or a catalog model id), on real agents (built-in CPU engine).
 */
describe('one base URL per workspace (/v1, routed by model)', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let other: TestWorkspace;
  let chat: Created;
  let idleChat: Created;
  let embedding: Created;
  let edit: Created;
  let foreign: Created;
  let chatModel: string;
  let client: OpenAI;

  beforeAll(async () => {
    test = await startTestServer();
    chatModel = test.server.controlPlane.catalog.defaultChatModel().id;
    workspace = await test.createWorkspace();
    other = await test.createWorkspace();
    chat = await test.createDeployment(workspace);
    embedding = await test.createDeployment(workspace, { modelId: BGE });
    edit = await test.createDeployment(workspace, { modelId: EDIT_MODEL });
    // A second deployment of the chat model (no agent: external) makes the catalog id ambiguous.
    idleChat = await test.createDeployment(workspace, { provider: 'external' });
    foreign = await test.createDeployment(other, { provider: 'external', modelId: BGE });
    await test.waitForReplicas(chat.id, 1);
    await test.waitForReplicas(embedding.id, 1);
    await test.waitForReplicas(edit.id, 1);
    client = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: workspace.apiKey, maxRetries: 0 });
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('lists exactly the workspace\'s deployments, each by slug with the model it serves', async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    expect(models.map((model) => model.id).sort()).toEqual([chat.slug, embedding.slug, edit.slug, idleChat.slug].sort());
    expect(models.find((model) => model.id === embedding.slug)).toMatchObject({ object: 'model', owned_by: workspace.workspaceId, root: BGE });
    expect(models.map((model) => model.id)).not.toContain(foreign.slug);
    expect(await client.models.retrieve(chat.slug)).toMatchObject({ id: chat.slug, root: chatModel });
    expect(await client.models.retrieve(BGE)).toMatchObject({ id: embedding.slug, root: BGE });
    await expect(client.models.retrieve(foreign.slug)).rejects.toMatchObject({ status: 404, code: 'model_not_found' });
  });

  it('answers chat (JSON and stream) on a deployment picked by slug, with both rate-limit vocabularies', async () => {
    const { data, response } = await client.chat.completions.create({
      model: chat.slug, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8,
    }).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0].message.content).toBeTruthy();
    expect(data.usage!.completion_tokens).toBeGreaterThan(0);
    const headers = response.headers;
    expect(Number(headers.get('x-ratelimit-limit-requests'))).toBe(Number(headers.get('x-ratelimit-limit')));
    expect(Number(headers.get('x-ratelimit-remaining-requests'))).toBe(Number(headers.get('x-ratelimit-remaining')));
    expect(Number(headers.get('x-ratelimit-remaining-requests'))).toBeLessThan(Number(headers.get('x-ratelimit-limit-requests')));
    expect(headers.get('x-ratelimit-reset-requests')).toMatch(/^(?:\d+m)?\d+(?:\.\d+)?s$|^\d+ms$/);
    expect(Number(headers.get('x-ratelimit-remaining-tokens'))).toBeLessThanOrEqual(Number(headers.get('x-ratelimit-limit-tokens')));
    expect(headers.get('x-ratelimit-reset-tokens')).toMatch(/^(?:\d+h)?(?:\d+m)?\d+s$/);

    const stream = await client.chat.completions.create({
      model: chat.slug, messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true, stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      usage = chunk.usage ?? usage;
    }
    expect(text.length).toBeGreaterThan(0);
    expect(usage!.completion_tokens).toBeGreaterThan(0);

    const completion = await client.completions.create({ model: chat.slug, prompt: 'Once upon a time', max_tokens: 4 });
    expect(completion.object).toBe('text_completion');
    expect(completion.model).toBe(chatModel);
  });

  it('answers embeddings on the one deployment serving a catalog model id', async () => {
    const answer = await client.embeddings.create({ model: BGE, input: 'alpha', encoding_format: 'float' });
    expect(answer.data[0].embedding).toHaveLength(1024);
    expect(answer.model).toBe(BGE);
    const bySlug = await client.embeddings.create({ model: embedding.slug, input: 'alpha', encoding_format: 'float' });
    expect(bySlug.data[0].embedding).toEqual(answer.data[0].embedding);
  });

  it('routes a multipart images/edits by its model form field', async () => {
    const input = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#2040c0' } }).png().toBuffer();
    const result = await client.images.edit({
      model: edit.slug, prompt: 'make it sunset', size: '512x512', response_format: 'b64_json',
      image: await toFile(input, 'input.png', { type: 'image/png' }),
    });
    expect((await sharp(Buffer.from(result.data![0].b64_json!, 'base64')).metadata()).width).toBe(512);
    const form = new FormData();
    form.append('prompt', 'no model');
    form.append('image', new Blob([new Uint8Array(input)], { type: 'image/png' }), 'input.png');
    const response = await fetch(`${test.url}/v1/images/edits`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` }, body: form });
    expect(response.status).toBe(400);
    expect((await response.json()).error).toMatchObject({ code: 'invalid_request', param: 'model' });
    // Async: submitted on /v1, its request record is polled on /v1 (by id, in the key's workspace).
    const asyncForm = new FormData();
    asyncForm.append('model', EDIT_MODEL);
    asyncForm.append('prompt', 'make it sunset');
    asyncForm.append('size', '512x512');
    asyncForm.append('image', new Blob([new Uint8Array(input)], { type: 'image/png' }), 'input.png');
    const submitted = await fetch(`${test.url}/v1/images/edits?async=true`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` }, body: asyncForm });
    expect(submitted.status).toBe(202);
    const { id } = await submitted.json() as { id: string };
    let record: { status?: string } = {};
    for (let attempt = 0; attempt < 400 && record.status !== 'succeeded' && record.status !== 'failed'; attempt++) {
      const polled = await fetch(`${test.url}/v1/requests/${id}`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
      expect(polled.status).toBe(200);
      record = await polled.json() as { status: string };
      if (record.status !== 'succeeded') await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(record.status).toBe('succeeded');
    const stranger = await fetch(`${test.url}/v1/requests/${id}`, { headers: { authorization: `Bearer ${other.apiKey}` } });
    const perDeployment = await fetch(`${foreign.baseUrl}/requests/${id}`, { headers: { authorization: `Bearer ${other.apiKey}` } });
    expect(stranger.status).toBe(perDeployment.status);
    expect(stranger.status).toBeGreaterThanOrEqual(403);

    // A form where JSON is taken is refused as the JSON it is not.
    const embeddingForm = new FormData();
    embeddingForm.append('model', embedding.slug);
    embeddingForm.append('input', 'x');
    const wrongType = await fetch(`${test.url}/v1/embeddings`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` }, body: embeddingForm });
    expect(wrongType.status).toBe(400);
    expect((await wrongType.json()).error.code).toBe('invalid_json');
  });

  it('refuses an ambiguous, unknown, missing or mistyped model with the choices, and another workspace\'s slug as unknown', async () => {
    const ask = (model: unknown) => client.chat.completions.create({ model: model as string, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
    const ambiguous = await ask(chatModel).catch((error: unknown) => error) as InstanceType<typeof OpenAI.APIError>;
    expect(ambiguous).toMatchObject({ status: 400, param: 'model' });
    expect(ambiguous.message).toContain(chat.slug);
    expect(ambiguous.message).toContain(idleChat.slug);

    const unknown = await ask('no-such-model').catch((error: unknown) => error) as InstanceType<typeof OpenAI.APIError>;
    expect(unknown).toMatchObject({ status: 404, code: 'model_not_found', param: 'model' });
    expect(unknown.message).toContain(`${embedding.slug} (${BGE})`);

    const foreignSlug = await ask(foreign.slug).catch((error: unknown) => error) as InstanceType<typeof OpenAI.APIError>;
    expect(foreignSlug).toMatchObject({ status: 404, code: 'model_not_found' });
    expect(foreignSlug.message).not.toContain(other.workspaceId);
    await expect(client.embeddings.create({ model: foreign.slug, input: 'x' })).rejects.toMatchObject({ status: 404, code: 'model_not_found' });

    const long = await ask('x'.repeat(5_000)).catch((error: unknown) => error) as InstanceType<typeof OpenAI.APIError>;
    expect(long.status).toBe(404);
    expect(long.message.length).toBeLessThan(1_200);

    for (const [path, body] of [['chat/completions', { messages: [{ role: 'user', content: 'hi' }] }], ['embeddings', { input: 'x' }], ['chat/completions', { model: 7, messages: [] }]] as const) {
      const response = await fetch(`${test.url}/v1/${path}`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(body),
      });
      expect(response.status).toBe(400);
      expect((await response.json()).error).toMatchObject({ code: 'invalid_request', param: 'model' });
    }
    const malformed = await fetch(`${test.url}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' }, body: '{"model": "a",',
    });
    expect(malformed.status).toBe(400);
    expect((await malformed.json()).error.code).toBe('invalid_json');
  });

  it('refuses a bad key with 401, and endpoints that are only per deployment (listings, the Batch API) with a 404 that says where they are', async () => {
    const stranger = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: 'mk-not-a-key', maxRetries: 0 });
    await expect(stranger.models.list()).rejects.toMatchObject({ status: 401 });
    await expect(stranger.chat.completions.create({ model: chat.slug, messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 401 });
    const files = await fetch(`${test.url}/v1/files`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(files.status).toBe(404);
    expect((await files.json()).error.message).toContain('/d/<slug>/v1');
  });

  it('records usage exactly as the deployment\'s own URL does', async () => {
    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    // A key of its own: the records of this test are the only ones it has.
    const { apiKey, plaintext } = await test.server.controlPlane.apiKeys.create(workspace.workspaceId, 'usage comparison', {});
    const body = { messages: [{ role: 'user' as const, content: 'the same question' }], max_tokens: 6, seed: 3 };
    const perDeployment = new OpenAI({ baseURL: chat.baseUrl, apiKey: plaintext, maxRetries: 0 });
    const viaDeployment = await perDeployment.chat.completions.create({ ...body, model: chatModel });
    const root = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: plaintext, maxRetries: 0 });
    const viaRoot = await root.chat.completions.create({ ...body, model: chat.slug });
    expect(viaRoot.usage).toEqual(viaDeployment.usage);
    expect(viaRoot.model).toBe(viaDeployment.model);
    const fields = (record: UsageRecord) => ({
      workspaceId: record.workspaceId, apiKeyId: record.apiKeyId, deploymentId: record.deploymentId, replicaId: record.replicaId, endpoint: record.endpoint,
      status: record.status, stream: record.stream, promptTokens: record.promptTokens, completionTokens: record.completionTokens, totalTokens: record.totalTokens,
    });
    let last: UsageRecord[] = [];
    await waitForRecords(async () => {
      last = await records.find({ where: { apiKeyId: apiKey.id }, order: { id: 'DESC' } });
      return last.length >= 2;
    });
    expect(last).toHaveLength(2);
    expect(fields(last[0])).toEqual(fields(last[1]));
    expect(last[0]).toMatchObject({ endpoint: 'chat.completions', stream: false, totalTokens: viaRoot.usage!.total_tokens });
    expect(last[0].deploymentId).toBe(chat.id);
  });

  it('sends the rate-limit headers on a 429, on both URLs', async () => {
    const limited = await test.createWorkspace({ rpmLimit: 1 });
    const limitedDeployment = await test.createDeployment(limited, { provider: 'external', modelId: BGE });
    const root = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: limited.apiKey, maxRetries: 0 });
    // The deployment has no replica: the first call is admitted (counted) and fails on routing; the second is over the minute's limit.
    await root.embeddings.create({ model: limitedDeployment.slug, input: 'x' }).catch(() => undefined);
    for (const url of [`${test.url}/v1/embeddings`, `${limitedDeployment.baseUrl}/embeddings`]) {
      const response = await fetch(url, {
        method: 'POST', headers: { authorization: `Bearer ${limited.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: BGE, input: 'x' }),
      });
      expect(response.status).toBe(429);
      expect(response.headers.get('x-ratelimit-limit-requests')).toBe('1');
      expect(response.headers.get('x-ratelimit-remaining-requests')).toBe('0');
      expect(response.headers.get('x-ratelimit-reset-requests')).toMatch(/^(?:\d+m)?\d+s$/);
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
  });

  it('counts /v1 requests under the deployment they reached, on the Koa path and in the fast lane', async () => {
    const samples = parsePrometheusText(await (await fetch(`${test.url}/metrics`)).text());
    // The two embeddings calls of the embeddings test, both on /v1 (nothing else called that deployment).
    expect(sampleValue(samples, 'inference_requests_total', { deployment: embedding.id, route: 'embeddings', status: '200' })).toBe(2);
    // Chat: JSON and stream of the chat test on /v1, then one call on each URL in the usage test.
    expect(sampleValue(samples, 'inference_requests_total', { deployment: chat.id, route: 'chat.completions', status: '200' })).toBe(4);
    expect(sampleValue(samples, 'inference_requests_total', { deployment: chat.id, route: 'completions', status: '200' })).toBe(1);
  });

  it('answers a stored response by id on /v1 as on its deployment\'s URL, and never another workspace\'s or a guest\'s', async () => {
    const created = await client.responses.create({ model: chat.slug, input: 'remember the word teal', max_output_tokens: 8 });
    const retrieved = await client.responses.retrieve(created.id);
    expect(retrieved).toMatchObject({ id: created.id, status: created.status, model: chatModel });
    expect(retrieved.output).toEqual(created.output);
    const onDeployment = new OpenAI({ baseURL: chat.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    expect((await onDeployment.responses.retrieve(created.id)).output).toEqual(created.output);
    const items = await client.responses.inputItems.list(created.id);
    expect(items.data).toHaveLength(1);
    expect(items.data[0]).toMatchObject({ type: 'message', role: 'user' });

    // A chain continued on /v1 by id alone, then cancel: only background responses can be.
    const next = await client.responses.create({ model: chat.slug, input: 'and now?', previous_response_id: created.id, max_output_tokens: 8 });
    expect((await client.responses.inputItems.list(next.id)).data).toHaveLength(1);
    await expect(client.responses.cancel(created.id)).rejects.toMatchObject({ status: 400, param: 'response_id' });

    const stranger = new OpenAI({ baseURL: `${test.url}/v1`, apiKey: other.apiKey, maxRetries: 0 });
    await expect(stranger.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.delete(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.cancel(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(stranger.responses.inputItems.list(created.id)).rejects.toMatchObject({ status: 404 });

    await client.responses.delete(created.id);
    await expect(client.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    await expect(onDeployment.responses.retrieve(created.id)).rejects.toMatchObject({ status: 404 });
    // The chain's later turn keeps its own copy of what came before (docs/api-contract.md#responses-api).
    expect((await client.responses.retrieve(next.id)).output).toEqual(next.output);
  });

  it('cancels a background response on /v1', async () => {
    const queued = await client.responses.create({ model: chat.slug, input: 'a long story', background: true, max_output_tokens: 4096 });
    expect(['queued', 'in_progress', 'completed']).toContain(queued.status);
    const answer = await fetch(`${test.url}/v1/responses/${queued.id}/cancel`, { method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}` } });
    const body = await answer.json();
    // It may have finished first on a fast machine: then the cancel is the 400 that says so.
    if (answer.status === 200) expect(body).toMatchObject({ id: queued.id, status: 'cancelled' });
    else expect(body.error.message).toMatch(/already (completed|incomplete)/);
    expect((await client.responses.retrieve(queued.id)).status).toBe(answer.status === 200 ? 'cancelled' : body.error.message.match(/already (\w+)/)[1]);
  });

  it('refuses a paused deployment on /v1 as on its own URL', async () => {
    await test.server.controlPlane.deployments.pause(workspace.workspaceId, idleChat.id);
    for (const url of [`${test.url}/v1/chat/completions`, `${idleChat.baseUrl}/chat/completions`]) {
      const response = await fetch(url, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: url.includes('/d/') ? chatModel : idleChat.slug, messages: [{ role: 'user', content: 'hi' }] }),
      });
      expect(response.status).toBe(503);
      expect((await response.json()).error.code).toBe('deployment_paused');
    }
  });
});

async function waitForRecords(condition: () => Promise<boolean>): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    if (await condition()) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('usage records did not arrive');
}
