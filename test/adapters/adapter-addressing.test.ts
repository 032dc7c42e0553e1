import OpenAI, { toFile } from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, graphqlAs, openAIError } from '../security/support/security-client';
import { loraGguf } from './support/lora-files';
import { chatLine, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';

const ADAPTER = 'support-bot';

/**
 * LoRA adapters addressed by `model` (docs/adapters.md#addressing), with real agents on the
 * built-in CPU engine and the official SDK: on the deployment's endpoint and the workspace's
 * single base URL, JSON and SSE, the answer's `model` is the adapter's name; `/v1/models` lists
 * it with `parent`; usage records carry it and GraphQL groups by it; another workspace's
 * adapter name answers exactly as a made-up name. The CPU engine ignores the adapter itself
 * (the agent's part), so nothing here looks at generated text.
 */
describe('adapters addressed by model', () => {
  let server: TestServer;
  let owner: TestWorkspace;
  let other: TestWorkspace;
  let mine: TestDeployment;
  let theirs: TestDeployment;
  let adapterId: string;
  let baseModel: string;

  const sdk = (workspace: TestWorkspace, baseURL: string) => new OpenAI({ apiKey: workspace.apiKey, baseURL, maxRetries: 0 });
  const chat = (model: string) => ({ model, messages: [{ role: 'user' as const, content: 'hello' }], max_tokens: 4 });

  beforeAll(async () => {
    server = await startTestServer({ controlPlane: { batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50 } } });
    owner = await server.createWorkspace();
    other = await server.createWorkspace();
    mine = await server.createDeployment(owner);
    theirs = await server.createDeployment(other);
    baseModel = server.server.controlPlane.catalog.defaultChatModel().id;
    await server.waitForReplicas(mine.id, 1);
    await server.waitForReplicas(theirs.id, 1);
    const file = await sdk(owner, mine.baseUrl).files.create({ file: await toFile(loraGguf({ rank: 8 }), 'support.gguf'), purpose: 'user_data' });
    const asOwner = graphqlAs(server.url, owner.apiKey);
    const created = await asOwner('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name: ADAPTER, baseModel, fileId: file.id } });
    expect(created.body.errors).toBeUndefined();
    adapterId = created.body.data!.createAdapter.id;
    const attached = await asOwner('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapterId, d: mine.id });
    expect(attached.body.errors).toBeUndefined();
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  test.each([
    ['the deployment endpoint', () => mine.baseUrl],
    ['the single base URL', () => `${server.url}/v1`],
  ])('%s: chat, completions and responses, JSON and SSE, answer with the adapter\'s name', async (_where, baseUrl) => {
    const client = sdk(owner, baseUrl());
    const answer = await client.chat.completions.create(chat(ADAPTER));
    expect(answer.model).toBe(ADAPTER);
    const chunks = [];
    for await (const chunk of await client.chat.completions.create({ ...chat(ADAPTER), stream: true, stream_options: { include_usage: true } })) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(1);
    expect(new Set(chunks.map((chunk) => chunk.model))).toEqual(new Set([ADAPTER]));
    const completion = await client.completions.create({ model: ADAPTER, prompt: 'hello', max_tokens: 4 });
    expect(completion.model).toBe(ADAPTER);
    const response = await client.responses.create({ model: ADAPTER, input: 'hello', max_output_tokens: 16 });
    expect(response.model).toBe(ADAPTER);
    // The base model is still served beside it.
    expect((await client.chat.completions.create(chat(baseUrl() === mine.baseUrl ? baseModel : mine.slug))).model).toBe(baseModel);
  });

  test('/v1/models lists the attached adapter with parent, on the deployment and the single base URL', async () => {
    const onDeployment = await sdk(owner, mine.baseUrl).models.list();
    expect(onDeployment.data.map((model) => model.id)).toEqual([baseModel, ADAPTER]);
    expect(onDeployment.data[1]).toMatchObject({ id: ADAPTER, object: 'model', parent: baseModel });
    const onWorkspace = await sdk(owner, `${server.url}/v1`).models.list();
    expect(onWorkspace.data.find((model) => model.id === ADAPTER)).toMatchObject({ parent: baseModel });
    expect((await sdk(owner, mine.baseUrl).models.retrieve(ADAPTER))).toMatchObject({ id: ADAPTER, parent: baseModel });
    expect((await sdk(other, `${server.url}/v1`).models.list()).data.map((model) => model.id)).not.toContain(ADAPTER);
    expect((await sdk(other, theirs.baseUrl).models.list()).data.map((model) => model.id)).toEqual([baseModel]);
  });

  test('another workspace\'s adapter name answers exactly as a made-up name on chat, completions, responses and /v1/models, on both URLs', async () => {
    for (const baseUrl of [theirs.baseUrl, `${server.url}/v1`]) {
      for (const stream of [false, true]) {
        const body = { ...chat(ADAPTER), stream };
        const stolen = openAIError(await call('POST', `${baseUrl}/chat/completions`, `Bearer ${other.apiKey}`, body));
        const madeUp = openAIError(await call('POST', `${baseUrl}/chat/completions`, `Bearer ${other.apiKey}`, { ...body, model: 'no-such-bot' }));
        expect({ baseUrl, stream, ...stolen }).toEqual({ baseUrl, stream, ...madeUp });
        expect(stolen.param).toBe('model');
      }
    }
    // Completions and Responses, JSON and SSE, the same.
    const bodies = {
      completions: (model: string, stream: boolean) => ({ model, prompt: 'hello', max_tokens: 4, stream }),
      responses: (model: string, stream: boolean) => ({ model, input: 'hello', max_output_tokens: 16, stream }),
    };
    for (const baseUrl of [theirs.baseUrl, `${server.url}/v1`]) {
      for (const [route, body] of Object.entries(bodies)) {
        for (const stream of [false, true]) {
          const stolen = openAIError(await call('POST', `${baseUrl}/${route}`, `Bearer ${other.apiKey}`, body(ADAPTER, stream)));
          const madeUp = openAIError(await call('POST', `${baseUrl}/${route}`, `Bearer ${other.apiKey}`, body('no-such-bot', stream)));
          expect({ baseUrl, route, stream, ...stolen }).toEqual({ baseUrl, route, stream, ...madeUp });
          expect({ route, param: stolen.param }).toEqual({ route, param: 'model' });
        }
      }
      // Nor is it a model it can look up.
      const looked = openAIError(await call('GET', `${baseUrl}/models/${ADAPTER}`, `Bearer ${other.apiKey}`));
      const madeUp = openAIError(await call('GET', `${baseUrl}/models/no-such-bot`, `Bearer ${other.apiKey}`));
      expect({ baseUrl, ...looked }).toEqual({ baseUrl, ...madeUp });
      expect(looked.status).toBe(404);
    }
    const onWorkspace = openAIError(await call('POST', `${server.url}/v1/chat/completions`, `Bearer ${other.apiKey}`, chat(ADAPTER)));
    expect(onWorkspace).toMatchObject({ status: 404, code: 'model_not_found' });
    // Not even by its engine-facing name.
    const byRevision = openAIError(await call('POST', `${theirs.baseUrl}/chat/completions`, `Bearer ${other.apiKey}`, chat(`${adapterId}.r1`)));
    expect(byRevision.param).toBe('model');
  });

  test('a batch of another workspace naming the adapter fails exactly as one naming a made-up model', async () => {
    const client = sdk(other, theirs.baseUrl);
    const outcome = async (model: string) => {
      const file = await upload(client, jsonl([chatLine('line-1', 'hello', { model })]));
      const batch = await waitForBatch(client, (await client.batches.create({ input_file_id: file, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
      return { status: batch.status, errors: batch.errors?.data?.map((error) => ({ code: error.code, param: error.param, line: error.line })) };
    };
    const stolen = await outcome(ADAPTER);
    expect(stolen).toEqual(await outcome('no-such-bot'));
    expect(stolen).toEqual({ status: 'failed', errors: [{ code: 'mismatched_model', param: 'body.model', line: 1 }] });
  });

  test('embeddings with an adapter name is a 400 naming model', async () => {
    const refused = openAIError(await call('POST', `${server.url}/v1/embeddings`, `Bearer ${owner.apiKey}`, { model: ADAPTER, input: 'x' }));
    expect(refused).toMatchObject({ status: 400, param: 'model' });
  });

  test('usage records carry the adapter; GraphQL usage groups by it and the adapter sums its own', async () => {
    const from = new Date(Date.now() - 3_600_000).toISOString();
    await sdk(owner, mine.baseUrl).chat.completions.create(chat(ADAPTER));
    const records = server.server.controlPlane.dataSource.getRepository(UsageRecord);
    // 4 adapter requests on each URL and one more here, 2 of the base model's beside them.
    await waitFor(async () => (await records.count({ where: { workspaceId: owner.workspaceId } })) >= 11, 5_000, 'the workspace\'s usage records');
    // Exactly its own: the base model's requests carry none.
    expect(await records.count({ where: { workspaceId: owner.workspaceId, adapterId } })).toBe(9);
    const asOwner = graphqlAs(server.url, owner.apiKey);
    const to = new Date(Date.now() + 60_000).toISOString();
    const grouped = await asOwner('query($from: DateTimeISO!, $to: DateTimeISO!) { usage(from: $from, to: $to, groupBy: "adapter") { key label requests totalTokens } }', { from, to });
    expect(grouped.body.errors).toBeUndefined();
    const rows = grouped.body.data!.usage as Array<{ key: string; label: string; requests: number; totalTokens: number }>;
    const adapterRow = rows.find((row) => row.key === adapterId)!;
    expect(adapterRow).toMatchObject({ label: ADAPTER });
    expect(adapterRow.requests).toBe(await records.count({ where: { workspaceId: owner.workspaceId, adapterId } }));
    expect(rows.find((row) => row.key === '')).toMatchObject({ label: 'base model' });
    const own = await asOwner('query($id: ID!, $from: DateTimeISO!, $to: DateTimeISO!) { adapter(id: $id) { usage(from: $from, to: $to) { requests totalTokens } } }', { id: adapterId, from, to });
    expect(own.body.data!.adapter.usage).toEqual({ requests: adapterRow.requests, totalTokens: adapterRow.totalTokens });
    // The request log names the adapter on its requests, and none on the base model's.
    await server.server.controlPlane.requestLogRecorder.flush();
    const log = await asOwner('{ requestLog(first: 50) { entries { model adapterId adapterName } } }');
    const entries = log.body.data!.requestLog.entries as Array<{ model: string; adapterId: string | null; adapterName: string | null }>;
    expect(entries.filter((entry) => entry.adapterId === adapterId).length).toBe(9);
    expect(new Set(entries.map((entry) => `${entry.model}|${entry.adapterName}`))).toEqual(new Set([`${baseModel}|${ADAPTER}`, `${baseModel}|null`]));
    // The other workspace's usage has no adapter group.
    const theirsGrouped = await graphqlAs(server.url, other.apiKey)('query($from: DateTimeISO!, $to: DateTimeISO!) { usage(from: $from, to: $to, groupBy: "adapter") { key } }', { from, to });
    expect(theirsGrouped.text).not.toContain(adapterId);
  });

  test('once detached, the name is refused on the deployment at once', async () => {
    const asOwner = graphqlAs(server.url, owner.apiKey);
    const detached = await asOwner('mutation($a: ID!, $d: ID!) { detachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: adapterId, d: mine.id });
    expect(detached.body.errors).toBeUndefined();
    expect(openAIError(await call('POST', `${mine.baseUrl}/chat/completions`, `Bearer ${owner.apiKey}`, chat(ADAPTER)))).toMatchObject({ status: 400, param: 'model' });
    expect(openAIError(await call('POST', `${server.url}/v1/chat/completions`, `Bearer ${owner.apiKey}`, chat(ADAPTER)))).toMatchObject({ status: 404, code: 'model_not_found' });
    expect((await sdk(owner, mine.baseUrl).models.list()).data.map((model) => model.id)).toEqual([baseModel]);
  });
});
