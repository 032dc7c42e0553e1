import fs from 'node:fs';
import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { OPENAPI_FILE } from '../../gateway/openapi/openapi-document';
import { jsonl, chatLine, waitForBatch } from '../batches/support/batch-helpers';
import { SHARED_ID, SHARED_MODEL, startSharingFixture, type SharingFixture } from '../sharing/support/sharing-fixture';
import { OpenApiConformance } from '../support/openapi-conformance';
import { waitFor } from '../support/test-server';

const EMBEDDING_MODEL = 'BAAI/bge-large-en-v1.5';
const IMAGE_MODEL = 'black-forest-labs/FLUX.1-Kontext-dev';
const VIDEO_MODEL = 'Lightricks/LTX-Video';

/**
 * The OpenAPI document against the real server: every path and method of gateway/openapi/openapi.json
 * is called (successes and the cheap errors), through the openai SDK where it has the call, and
 * each answer's status, content type and body (each `data:` line of a stream) must be what the
 * document says. The last test fails when an operation of the document was never called.
 */
describe('the /v1 answers conform to the OpenAPI document', () => {
  const document = JSON.parse(fs.readFileSync(OPENAPI_FILE, 'utf8'));
  const conformance = new OpenApiConformance(document);
  let fixture: SharingFixture;
  let url: string;
  let owner: { id: string; apiKey: string };
  let guest: { id: string; apiKey: string };
  const base: Record<'chat' | 'embedding' | 'image' | 'video', string> = { chat: '', embedding: '', image: '', video: '' };

  const client = (baseURL: string, apiKey = owner.apiKey) => new OpenAI({ baseURL, apiKey, maxRetries: 0, fetch: conformance.fetch });
  /** A raw call through the conformance check: bodies the SDK would not send, and endpoints it has no method for. */
  const call = async (method: string, address: string, options: { body?: unknown; key?: string | null; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key !== null) headers.authorization = `Bearer ${options.key ?? owner.apiKey}`;
    let body: string | FormData | undefined;
    if (options.body instanceof FormData) body = options.body;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const response = await conformance.fetch(address, { method, headers, body, redirect: 'manual' });
    const text = await response.text();
    let json: any = null;
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
    return { status: response.status, json, text, headers: response.headers };
  };
  const png = (width: number, height: number) => sharp({ create: { width, height, channels: 3, background: '#3060a0' } }).png().toBuffer();

  beforeAll(async () => {
    // One media job at a time per replica: a second submission stays queued behind a slow one, so cancels of queued work are certain.
    fixture = await startSharingFixture({ controlPlane: { localMediaMaxConcurrency: 1 } });
    url = fixture.test.url;
    owner = await fixture.workspace('owner', '100');
    guest = await fixture.workspace('guest', '100');
    const as = { workspaceId: owner.id, apiKey: owner.apiKey, apiKeyId: '' };
    const [embedding, image, video] = [
      await fixture.test.createDeployment(as, { modelId: EMBEDDING_MODEL }),
      await fixture.test.createDeployment(as, { modelId: IMAGE_MODEL }),
      await fixture.test.createDeployment(as, { modelId: VIDEO_MODEL }),
    ];
    base.chat = (await fixture.sharedDeployment(owner.apiKey)).baseUrl;
    for (const deployment of [embedding, image, video]) await fixture.test.waitForReplicas(deployment.id, 1);
    Object.assign(base, { embedding: embedding.baseUrl, image: image.baseUrl, video: video.baseUrl });
  }, 120_000);

  afterAll(async () => {
    await fixture?.test.stop();
  });

  afterEach(async () => {
    expect(await conformance.settle()).toEqual([]);
  });

  it('GET /v1/openapi.json serves the checked-in document without a key, cacheable, with an ETag', async () => {
    const first = await call('GET', `${url}/v1/openapi.json`, { key: null });
    expect(first.status).toBe(200);
    expect(first.json).toEqual(document);
    expect(first.headers.get('cache-control')).toBe('public, max-age=86400');
    const again = await call('GET', `${url}/v1/openapi.json`, { key: null, headers: { 'if-none-match': first.headers.get('etag')! } });
    expect(again.status).toBe(304);
  });

  it('chat/completions: JSON and SSE answers, and its refusals', async () => {
    const chat = client(base.chat);
    const answer = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 });
    expect(answer.object).toBe('chat.completion');
    const stream = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true, stream_options: { include_usage: true } });
    let chunks = 0;
    for await (const chunk of stream) chunks += chunk.object === 'chat.completion.chunk' ? 1 : 0;
    expect(chunks).toBeGreaterThan(1);
    const tools: OpenAI.Chat.ChatCompletionTool[] = [{
      type: 'function', function: { name: 'get_weather', description: 'a city\'s weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }, strict: true },
    }];
    const called = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 32 });
    expect(called.choices[0].message.tool_calls?.[0]).toMatchObject({ type: 'function', function: { name: 'get_weather' } });
    const calledStream = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'weather?' }], tools, tool_choice: { type: 'function', function: { name: 'get_weather' } }, max_tokens: 32, stream: true });
    let toolDeltas = 0;
    for await (const chunk of calledStream) toolDeltas += chunk.choices[0]?.delta.tool_calls?.length ?? 0;
    expect(toolDeltas).toBeGreaterThan(0);
    const structured = await chat.chat.completions.create({
      messages: [{ role: 'user', content: 'a city' }], max_tokens: 32,
      response_format: { type: 'json_schema', json_schema: { name: 'city', schema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }, strict: true } },
    });
    expect(typeof JSON.parse(structured.choices[0].message.content!).name).toBe('string');
    const scored = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, logprobs: true, top_logprobs: 2 });
    expect(scored.choices[0].logprobs?.content?.length).toBeGreaterThan(0);
    const logprobStream = await chat.chat.completions.create({ messages: [{ role: 'user', content: 'hello' }], max_tokens: 4, logprobs: true, top_logprobs: 1, stream: true });
    for await (const chunk of logprobStream) expect(chunk.object).toBe('chat.completion.chunk');
    const badTool = await call('POST', `${base.chat}/chat/completions`, { body: { messages: [{ role: 'user', content: 'hi' }], tools: [{ type: 'function', function: { name: 'bad name' } }] } });
    expect(badTool.json.error).toMatchObject({ param: 'tools[0].function.name' });
    const cut = await call('POST', `${base.chat}/chat/completions`, { body: { messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true, cpu_engine: { fail_after_tokens: 2 } } });
    expect(cut.text).toContain('data: {"error":');
    await expect(chat.chat.completions.create({ model: 'another/model', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 400 });
    const salted = await call('POST', `${base.chat}/chat/completions`, { body: { messages: [{ role: 'user', content: 'hi' }], cache_salt: 'x' } });
    expect(salted.json.error).toMatchObject({ param: 'cache_salt' });
    await expect(client(base.chat, 'mk-not-a-key').chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 401 });
    await expect(client(`${url}/d/no-such-deployment/v1`).chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 404 });
    const { plaintext } = await fixture.test.server.controlPlane.apiKeys.create(owner.id, 'one a minute', { rpmLimit: 1 });
    const limited = client(base.chat, plaintext);
    await limited.chat.completions.create({ messages: [{ role: 'user', content: 'one' }], max_tokens: 2 });
    await expect(limited.chat.completions.create({ messages: [{ role: 'user', content: 'two' }], max_tokens: 2 })).rejects.toMatchObject({ status: 429 });
  });

  it('responses: created as JSON and as typed events (text and function calls), retrieved, listed, deleted; a bad field is a 400, an unknown id a 404', async () => {
    const responses = client(base.chat).responses;
    const answer = await responses.create({ input: 'hello there', max_output_tokens: 8, metadata: { case: 'openapi' } });
    expect(answer.object).toBe('response');
    const tools: OpenAI.Responses.FunctionTool[] = [{ type: 'function', name: 'get_weather', description: null, strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } } } }];
    const called = await responses.create({ input: 'weather in Paris?', tools, tool_choice: 'required', max_output_tokens: 32 });
    expect(called.output.map((item) => item.type)).toContain('function_call');
    const streamed = await responses.create({ input: [{ role: 'user', content: 'tell me more' }], previous_response_id: answer.id, max_output_tokens: 8, stream: true });
    const types: string[] = [];
    for await (const event of streamed) types.push(event.type);
    expect(types).toContain('response.output_text.delta');
    const helper = responses.stream({ input: 'weather?', tools, tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 32 });
    const final = await helper.finalResponse();
    expect(final.output.map((item) => item.type)).toContain('function_call');
    expect((await responses.retrieve(answer.id)).id).toBe(answer.id);
    const items = await responses.inputItems.list(final.id, { order: 'asc', limit: 5 });
    expect(items.data.length).toBeGreaterThan(0);
    expect((await call('GET', `${base.chat}/responses/${answer.id}?stream=true`)).status).toBe(400);
    expect((await call('GET', `${base.chat}/responses/${answer.id}/input_items?limit=0`)).status).toBe(400);
    expect((await responses.delete(called.id) as unknown as { deleted: boolean }).deleted).toBe(true);
    await expect(responses.retrieve(called.id)).rejects.toMatchObject({ status: 404 });
    await expect(responses.create({ input: 'x', truncation: 'auto' })).rejects.toMatchObject({ status: 400, param: 'truncation' });
    await expect(responses.delete('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
    await expect(responses.inputItems.list('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
    // Background: answered queued at once, then cancelled (or, if the CPU engine was faster, a 400 for a finished one: both are documented).
    const queued = await responses.create({ input: 'a long story', max_output_tokens: 2_000, background: true });
    expect(queued.status).toBe('queued');
    const cancel = await call('POST', `${base.chat}/responses/${queued.id}/cancel`);
    expect([200, 400]).toContain(cancel.status);
    await expect(responses.cancel(answer.id)).rejects.toMatchObject({ status: 400 });
    await expect(responses.cancel('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
  });

  it('the workspace base URL /v1: its deployments as models, each endpoint routed by model, records by id', async () => {
    const root = client(`${url}/v1`);
    const slug = /\/d\/([^/]+)\/v1$/.exec(base.chat)![1];
    expect((await root.models.list()).data.map((model) => model.id)).toContain(slug);
    expect((await root.models.retrieve(slug)).id).toBe(slug);
    await expect(root.models.retrieve('nobody/nothing')).rejects.toMatchObject({ status: 404 });
    expect((await root.chat.completions.create({ model: SHARED_MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })).object).toBe('chat.completion');
    const chatStream = await root.chat.completions.create({ model: slug, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true });
    for await (const chunk of chatStream) expect(chunk.object).toBe('chat.completion.chunk');
    await expect(root.chat.completions.create({ model: 'nobody/nothing', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 404 });
    expect((await call('POST', `${url}/v1/chat/completions`, { body: { messages: [{ role: 'user', content: 'hi' }] } })).json.error).toMatchObject({ param: 'model' });
    expect((await root.completions.create({ model: slug, prompt: 'Once upon', max_tokens: 4 })).object).toBe('text_completion');
    const rootAnswer = await root.responses.create({ model: slug, input: 'hello', max_output_tokens: 4 });
    expect(rootAnswer.object).toBe('response');
    expect((await root.responses.retrieve(rootAnswer.id)).id).toBe(rootAnswer.id);
    expect((await root.responses.inputItems.list(rootAnswer.id)).data).toHaveLength(1);
    await expect(root.responses.cancel(rootAnswer.id)).rejects.toMatchObject({ status: 400 });
    await expect(root.responses.retrieve('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
    expect((await root.responses.delete(rootAnswer.id) as unknown as { deleted: boolean }).deleted).toBe(true);
    const responseStream = await root.responses.create({ model: SHARED_MODEL, input: 'hello', max_output_tokens: 4, stream: true });
    for await (const event of responseStream) expect(typeof event.sequence_number).toBe('number');
    expect((await root.embeddings.create({ model: EMBEDDING_MODEL, input: 'one' })).data).toHaveLength(1);
    expect((await root.images.generate({ model: IMAGE_MODEL, prompt: 'a lighthouse', size: '512x512' })).data).toHaveLength(1);
    const edited = await root.images.edit({ model: IMAGE_MODEL, prompt: 'at dusk', size: '512x512', response_format: 'b64_json', image: await toFile(await png(64, 64), 'in.png', { type: 'image/png' }) });
    expect(edited.data).toHaveLength(1);

    const slow = await call('POST', `${url}/v1/images/generations?async=true`, { body: { model: IMAGE_MODEL, prompt: 'slow [cpu-engine:delay=1500]', size: '512x512' } });
    await waitFor(async () => (await call('GET', `${url}/v1/requests/${slow.json.id}`)).json.status === 'running', 20_000, 'the slow image to run');
    const queued = await call('POST', `${url}/v1/images/generations?async=true`, { body: { model: IMAGE_MODEL, prompt: 'waits', size: '512x512' } });
    expect((await call('POST', `${url}/v1/requests/${queued.json.id}/cancel`)).status).toBe(200);
    expect((await call('GET', `${url}/v1/requests/req_000000000000000000000000`)).status).toBe(404);

    const video = await root.videos.create({ model: VIDEO_MODEL, prompt: 'waves', seconds: '1', size: '704x480', fps: 8 } as never);
    await waitFor(async () => (await root.videos.retrieve(video.id)).status === 'in_progress', 20_000, 'the video to run');
    const waiting = await call('POST', `${url}/v1/videos/generations`, { body: { model: VIDEO_MODEL, prompt: 'clouds', resolution: '704x480', duration: 1, fps: 8 } });
    expect(waiting.status).toBe(202);
    expect((await call('POST', `${url}/v1/videos/${waiting.json.id}/cancel`)).status).toBe(204);
    await waitFor(async () => (await root.videos.retrieve(video.id)).status === 'completed', 30_000, 'the video');
    expect((await call('GET', `${url}/v1/videos/${video.id}/content`)).status).toBe(302);
    await waitFor(async () => (await call('GET', `${url}/v1/requests/${slow.json.id}`)).json.status === 'succeeded', 20_000, 'the slow image');
  });

  it('completions: JSON and SSE answers; a body without prompt is a 400', async () => {
    const completions = client(base.chat).completions;
    expect((await completions.create({ model: SHARED_MODEL, prompt: 'Once upon', max_tokens: 6 })).object).toBe('text_completion');
    const stream = await completions.create({ prompt: ['Once upon', 'a time'], max_tokens: 4, stream: true });
    for await (const chunk of stream) expect(chunk.object).toBe('text_completion');
    expect((await call('POST', `${base.chat}/completions`, { body: { max_tokens: 4 } })).status).toBe(400);
  });

  it('embeddings: float and base64 vectors; embeddings of a chat model are a 400', async () => {
    const embeddings = client(base.embedding).embeddings;
    expect((await embeddings.create({ model: EMBEDDING_MODEL, input: ['one', 'two'], encoding_format: 'float' })).data).toHaveLength(2);
    expect((await call('POST', `${base.embedding}/embeddings`, { body: { input: 'three', encoding_format: 'base64' } })).status).toBe(200);
    expect((await call('POST', `${base.chat}/embeddings`, { body: { input: 'three' } })).status).toBe(400);
  });

  it('models: the endpoint\'s model, listed and by id (slashes and all); another id is a 404', async () => {
    const models = client(base.image).models;
    expect((await models.list()).data.map((model) => model.id)).toEqual([IMAGE_MODEL]);
    expect((await models.retrieve(IMAGE_MODEL)).id).toBe(IMAGE_MODEL);
    await expect(models.retrieve('other/model')).rejects.toMatchObject({ status: 404 });
  });

  it('images: generations and edits, as links, inline and asynchronous; an unoffered size is a 422, an edit without its image a 400', async () => {
    const images = client(base.image).images;
    expect((await images.generate({ model: IMAGE_MODEL, prompt: 'a lighthouse', size: '512x512' })).data).toHaveLength(1);
    expect((await images.generate({ model: IMAGE_MODEL, prompt: 'a lighthouse', size: '512x512', response_format: 'b64_json' })).data![0].b64_json).toBeTruthy();
    const edited = await images.edit({ model: IMAGE_MODEL, prompt: 'at dusk', size: '512x512', response_format: 'b64_json', image: await toFile(await png(64, 64), 'in.png', { type: 'image/png' }) });
    expect(edited.data).toHaveLength(1);
    const queued = await call('POST', `${base.image}/images/generations?async=true`, { body: { model: IMAGE_MODEL, prompt: 'later', size: '512x512' }, headers: { 'idempotency-key': `openapi-${Date.now()}` } });
    expect(queued.status).toBe(202);
    const form = new FormData();
    form.set('image', new Blob([await png(64, 64)], { type: 'image/png' }), 'in.png');
    form.set('model', IMAGE_MODEL);
    form.set('prompt', 'later');
    form.set('size', '512x512');
    expect((await call('POST', `${base.image}/images/edits?async=true`, { body: form })).status).toBe(202);
    await expect(images.generate({ model: IMAGE_MODEL, prompt: 'huge', size: '1792x1024' })).rejects.toMatchObject({ status: 422 });
    const noImage = new FormData();
    noImage.set('model', IMAGE_MODEL);
    noImage.set('prompt', 'nothing to edit');
    expect((await call('POST', `${base.image}/images/edits`, { body: noImage })).status).toBe(400);
    await waitFor(async () => (await call('GET', `${base.image}/requests/${queued.json.id}`)).json.status === 'succeeded', 20_000, 'the async image');
  });

  it('requests: listed, read, canceled while queued; a running one is a 409, an unknown id a 404', async () => {
    const slow = await call('POST', `${base.image}/images/generations?async=true`, { body: { model: IMAGE_MODEL, prompt: 'slow [cpu-engine:delay=2500]', size: '512x512' } });
    await waitFor(async () => (await call('GET', `${base.image}/requests/${slow.json.id}`)).json.status === 'running', 20_000, 'the slow image to run');
    const queued = await call('POST', `${base.image}/images/generations?async=true`, { body: { model: IMAGE_MODEL, prompt: 'waits', size: '512x512' } });
    expect((await call('POST', `${base.image}/requests/${queued.json.id}/cancel`)).status).toBe(200);
    expect((await call('POST', `${base.image}/requests/${slow.json.id}/cancel`)).status).toBe(409);
    expect((await call('GET', `${base.image}/requests?status=canceled&limit=5`)).json.data[0].id).toBe(queued.json.id);
    expect((await call('GET', `${base.image}/requests?limit=none`)).status).toBe(400);
    expect((await call('GET', `${base.image}/requests/req_000000000000000000000000`)).status).toBe(404);
    await waitFor(async () => (await call('GET', `${base.image}/requests/${slow.json.id}`)).json.status === 'succeeded', 20_000, 'the slow image');
  });

  it('videos: created (multipart and JSON), listed, read, downloaded, canceled; the refusals of each', async () => {
    const videos = client(base.video).videos;
    const slow = await videos.create({ model: VIDEO_MODEL, prompt: 'slow [cpu-engine:delay=3000]', seconds: '1', size: '704x480', fps: 8 } as never);
    expect(slow.object).toBe('video');
    await waitFor(async () => (await videos.retrieve(slow.id)).status === 'in_progress', 20_000, 'the slow video to run');
    const generations = await call('POST', `${base.video}/videos/generations`, { body: { model: VIDEO_MODEL, prompt: 'waves', resolution: '704x480', duration: 1, fps: 8 } });
    expect(generations.status).toBe(202);
    expect((await call('POST', `${base.video}/videos/${generations.json.id}/cancel`)).status).toBe(204);
    expect((await call('POST', `${base.video}/videos/${slow.id}/cancel`)).status).toBe(409);
    expect((await call('GET', `${base.video}/videos/${slow.id}/content`)).status).toBe(409);
    expect((await videos.list({ limit: 5 } as never)).data.length).toBeGreaterThan(0);
    await expect(videos.create({ model: VIDEO_MODEL, prompt: 'tiny', seconds: '1', size: '64x64' } as never)).rejects.toMatchObject({ status: 422 });
    expect((await call('POST', `${base.video}/videos/generations`, { body: { model: VIDEO_MODEL, prompt: 'x', input_reference: 'no' } })).status).toBe(400);
    expect((await call('GET', `${base.video}/videos?limit=0`)).status).toBe(400);
    expect((await call('GET', `${base.video}/videos/req_000000000000000000000000`)).status).toBe(404);
    await waitFor(async () => (await videos.retrieve(slow.id)).status === 'completed', 30_000, 'the slow video');
    const content = await call('GET', `${base.video}/videos/${slow.id}/content`);
    expect(content.status).toBe(302);
  });

  it('files and batches: the Batch API\'s calls and its refusals', async () => {
    const batchClient = client(base.chat);
    const file = await batchClient.files.create({ file: await toFile(jsonl([chatLine('a', 'hello'), chatLine('b', 'again')]), 'in.jsonl'), purpose: 'batch' });
    expect((await batchClient.files.list()).data.map((listed) => listed.id)).toContain(file.id);
    expect((await batchClient.files.retrieve(file.id)).id).toBe(file.id);
    expect((await (await batchClient.files.content(file.id)).text()).split('\n')).toHaveLength(3);
    const noPurpose = new FormData();
    noPurpose.set('file', new Blob(['{}\n']), 'in.jsonl');
    expect((await call('POST', `${base.chat}/files`, { body: noPurpose })).status).toBe(400);
    expect((await call('GET', `${base.chat}/files?order=sideways`)).status).toBe(400);

    const batch = await batchClient.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect((await batchClient.batches.list()).data.map((listed) => listed.id)).toContain(batch.id);
    const done = await waitForBatch(batchClient, batch.id);
    expect(done.status).toBe('completed');
    const second = await batchClient.batches.create({ input_file_id: file.id, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { run: 'two' } });
    expect(['cancelling', 'cancelled', 'completed']).toContain((await batchClient.batches.cancel(second.id)).status);
    await expect(batchClient.batches.create({ input_file_id: file.id, endpoint: '/v1/embeddings', completion_window: '24h' })).rejects.toMatchObject({ status: 400 });
    await expect(batchClient.batches.retrieve('batch_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
    await waitForBatch(batchClient, second.id);
    expect((await batchClient.files.delete(done.output_file_id!)).deleted).toBe(true);
    await expect(batchClient.files.retrieve(done.output_file_id!)).rejects.toMatchObject({ status: 404 });
  });

  it('the shared endpoint: models with prices, chat as JSON and SSE; an unknown model is a 404, a guest without credit a 402', async () => {
    const shared = client(`${url}/shared/v1`, guest.apiKey);
    expect((await shared.models.list()).data.map((model) => model.id)).toContain(SHARED_ID);
    expect((await shared.models.retrieve(SHARED_ID)).id).toBe(SHARED_ID);
    await expect(shared.models.retrieve('shared/nobody/nothing')).rejects.toMatchObject({ status: 404 });
    expect((await shared.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 })).object).toBe('chat.completion');
    const stream = await shared.chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, stream: true });
    for await (const chunk of stream) expect(chunk.object).toBe('chat.completion.chunk');
    await expect(shared.chat.completions.create({ model: 'shared/nobody/nothing', messages: [{ role: 'user', content: 'hi' }] })).rejects.toMatchObject({ status: 404 });
    const broke = await fixture.workspace('broke', '0');
    await expect(client(`${url}/shared/v1`, broke.apiKey).chat.completions.create({ model: SHARED_ID, messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 }))
      .rejects.toMatchObject({ status: 402 });
    await expect(client(`${url}/shared/v1`, 'mk-not-a-key').models.list()).rejects.toMatchObject({ status: 401 });
  });

  it('the shared endpoint\'s responses: created as JSON and events, retrieved, listed, deleted; refusals', async () => {
    const responses = client(`${url}/shared/v1`, guest.apiKey).responses;
    const answer = await responses.create({ model: SHARED_ID, input: 'hello', max_output_tokens: 5 });
    expect(answer.object).toBe('response');
    const final = await responses.stream({ model: SHARED_ID, input: 'and again', previous_response_id: answer.id, max_output_tokens: 5 }).finalResponse();
    expect((await responses.retrieve(final.id)).id).toBe(final.id);
    expect((await responses.inputItems.list(final.id)).data).toHaveLength(1);
    expect((await responses.delete(answer.id) as unknown as { deleted: boolean }).deleted).toBe(true);
    await expect(responses.retrieve(answer.id)).rejects.toMatchObject({ status: 404 });
    await expect(responses.create({ model: 'shared/nobody/nothing', input: 'hi' })).rejects.toMatchObject({ status: 404 });
    await expect(responses.create({ model: SHARED_ID, input: [] })).rejects.toMatchObject({ status: 400, param: 'input' });
    expect((await call('GET', `${url}/shared/v1/responses/${final.id}/input_items?order=up`, { key: guest.apiKey })).status).toBe(400);
    await expect(responses.inputItems.list('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
    await expect(responses.delete('resp_000000000000000000000000')).rejects.toMatchObject({ status: 404 });
  });

  it('called every path and method of the document', () => {
    const uncalled = conformance.operations().filter((operation) => !conformance.covered.has(operation));
    expect(uncalled).toEqual([]);
  });
});
