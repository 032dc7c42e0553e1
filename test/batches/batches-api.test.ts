import OpenAI from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startTestServer, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';
import { call, chatLine, fileLines, jsonl, upload, waitForBatch } from './support/batch-helpers';

const EMBEDDING_MODEL = 'BAAI/bge-large-en-v1.5';

/**
 * The OpenAI Batch API on deployment endpoints, driven by the official SDK: files, batches,
 * their whole cycle on a chat and an embedding deployment, invalid files, isolation between
 * workspaces, and bad input on every endpoint (400 naming the field).
 */
describe('batches: the API', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let other: TestWorkspace;
  let chat: { id: string; slug: string; baseUrl: string };
  let embedding: { id: string; slug: string; baseUrl: string };
  let client: OpenAI;
  let chatModel: string;

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50 } } });
    workspace = await test.createWorkspace();
    other = await test.createWorkspace();
    chat = await test.createDeployment(workspace);
    embedding = await test.createDeployment(workspace, { modelId: EMBEDDING_MODEL });
    await test.waitForReplicas(chat.id, 1);
    await test.waitForReplicas(embedding.id, 1);
    client = new OpenAI({ baseURL: chat.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    chatModel = test.server.controlPlane.catalog.defaultChatModel().id;
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('runs chat lines to completed: every custom_id answered once, good lines in the output file in input order, refused ones in the error file', async () => {
    const good = Array.from({ length: 12 }, (_, index) => chatLine(`chat-${index}`, `hello number ${index}`, index % 2 === 0 ? { model: chatModel } : {}));
    const refused = [
      chatLine('negative-max-tokens', 'hi', { max_tokens: -1 }),
      { custom_id: 'no-messages', method: 'POST', url: '/v1/chat/completions', body: { max_tokens: 4 } },
    ];
    const inputFileId = await upload(client, jsonl([...good.slice(0, 6), refused[0], ...good.slice(6), refused[1]]));
    const created = await client.batches.create({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { purpose: 'test' } });
    expect(created).toMatchObject({
      object: 'batch', endpoint: '/v1/chat/completions', input_file_id: inputFileId, completion_window: '24h', status: 'validating',
      metadata: { purpose: 'test' }, output_file_id: null, error_file_id: null, errors: null, model: chatModel,
      request_counts: { total: 0, completed: 0, failed: 0 },
    });
    expect(created.id).toMatch(/^batch_[0-9a-f]{24}$/);
    expect(created.expires_at! - created.created_at).toBe(86_400);

    const batch = await waitForBatch(client, created.id);
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toEqual({ total: 14, completed: 12, failed: 2 });
    for (const field of ['in_progress_at', 'finalizing_at', 'completed_at'] as const) expect(batch[field]).toEqual(expect.any(Number));
    expect(batch).toMatchObject({ failed_at: null, expired_at: null, cancelling_at: null, cancelled_at: null });

    const output = await fileLines(client, batch.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(good.map((line) => line.custom_id));
    for (const line of output) {
      expect(line.id).toMatch(/^batch_req_[0-9a-f]+$/);
      expect(line.error).toBeNull();
      expect(line.response).toMatchObject({ status_code: 200, request_id: expect.any(String), body: { object: 'chat.completion', model: chatModel } });
      expect(line.response.body.choices[0].message.content.length).toBeGreaterThan(0);
    }
    const errors = await fileLines(client, batch.error_file_id);
    expect(errors.map((line) => [line.custom_id, line.response.status_code, line.response.body.error.param])).toEqual([
      ['negative-max-tokens', 400, 'max_tokens'], ['no-messages', 400, 'messages'],
    ]);
    expect(errors[0].response.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request' });
    expect(new Set([...output, ...errors].map((line) => line.id)).size).toBe(14);

    // Usage: the engines' own counts, summed on the batch and recorded per batch.
    const prompt = output.reduce((sum, line) => sum + line.response.body.usage.prompt_tokens, 0);
    const completion = output.reduce((sum, line) => sum + line.response.body.usage.completion_tokens, 0);
    expect(batch.usage).toMatchObject({ input_tokens: prompt, output_tokens: completion, total_tokens: prompt + completion });
    const records = test.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.countBy({ batchId: batch.id })) === 12, 5_000, 'the usage records of the batch');
    const recorded = await records.findBy({ batchId: batch.id });
    expect(recorded.reduce((sum, record) => sum + record.totalTokens, 0)).toBe(prompt + completion);
    expect(recorded.every((record) => record.deploymentId === chat.id && record.endpoint === 'chat.completions')).toBe(true);

    // The output and error files are files of the endpoint, like the input.
    const outputFile = await client.files.retrieve(batch.output_file_id!);
    expect(outputFile).toMatchObject({ object: 'file', purpose: 'batch_output', status: 'processed', filename: `${batch.id}_output.jsonl` });
    const listed = [];
    for await (const file of client.files.list()) listed.push(file.id);
    expect(listed).toEqual(expect.arrayContaining([inputFileId, batch.output_file_id, batch.error_file_id]));
    const listedBatches = [];
    for await (const item of client.batches.list()) listedBatches.push(item.id);
    expect(listedBatches).toContain(batch.id);
  });

  it('runs completions lines on a chat deployment', async () => {
    const lines = ['one', 'two', 'three'].map((word) => ({ custom_id: word, method: 'POST', url: '/v1/completions', body: { prompt: `say ${word}`, max_tokens: 5 } }));
    const created = await client.batches.create({ input_file_id: await upload(client, jsonl(lines)), endpoint: '/v1/completions', completion_window: '24h' });
    const batch = await waitForBatch(client, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 3, completed: 3, failed: 0 }, error_file_id: null, metadata: null });
    const output = await fileLines(client, batch.output_file_id);
    expect(output.map((line) => [line.custom_id, line.response.body.object])).toEqual([['one', 'text_completion'], ['two', 'text_completion'], ['three', 'text_completion']]);
  });

  it('runs embedding lines on an embedding deployment, a line of more inputs than one engine batch included', async () => {
    const embeddings = new OpenAI({ baseURL: embedding.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const many = Array.from({ length: 70 }, (_, index) => `passage ${index}`);
    const lines = [
      { custom_id: 'single', method: 'POST', url: '/v1/embeddings', body: { input: 'one passage', model: EMBEDDING_MODEL } },
      { custom_id: 'pair', method: 'POST', url: '/v1/embeddings', body: { input: ['alpha', 'beta'], encoding_format: 'float' } },
      { custom_id: 'many', method: 'POST', url: '/v1/embeddings', body: { input: many, encoding_format: 'float' } },
      { custom_id: 'empty', method: 'POST', url: '/v1/embeddings', body: { input: '' } },
    ];
    const created = await embeddings.batches.create({ input_file_id: await upload(embeddings, jsonl(lines)), endpoint: '/v1/embeddings', completion_window: '24h' });
    const batch = await waitForBatch(embeddings, created.id);
    expect(batch).toMatchObject({ status: 'completed', request_counts: { total: 4, completed: 3, failed: 1 } });
    const output = await fileLines(embeddings, batch.output_file_id);
    expect(output.map((line) => line.custom_id)).toEqual(['single', 'pair', 'many']);
    const [single, pair, big] = output.map((line) => line.response.body);
    expect(single).toMatchObject({ object: 'list', model: EMBEDDING_MODEL });
    expect(pair.data.map((item: { index: number; embedding: number[] }) => [item.index, item.embedding.length])).toEqual([[0, 1024], [1, 1024]]);
    expect(big.data.map((item: { index: number }) => item.index)).toEqual(many.map((_, index) => index));
    // The same input gives the same vector as a live call.
    const live = await embeddings.embeddings.create({ input: 'passage 69', encoding_format: 'float' });
    expect(big.data[69].embedding).toEqual(live.data[0].embedding);
    const errors = await fileLines(embeddings, batch.error_file_id);
    expect(errors).toEqual([expect.objectContaining({ custom_id: 'empty', response: expect.objectContaining({ status_code: 400, body: { error: expect.objectContaining({ param: 'input' }) } }) })]);
    // A chat endpoint is not what this deployment serves: 400 naming endpoint and what it may be.
    const refused = await embeddings.batches.create({ input_file_id: created.input_file_id, endpoint: '/v1/chat/completions', completion_window: '24h' }).catch((error) => error);
    expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
    expect(refused.param).toBe('endpoint');
    expect(refused.message).toContain('"/v1/embeddings"');
  });

  it('fails an invalid input file before running anything, its errors naming lines', async () => {
    const lines = [
      chatLine('fine', 'hi'),
      '{"custom_id": "broken", "method": "POST"',
      { method: 'POST', url: '/v1/chat/completions', body: { messages: [] } },
      chatLine('fine', 'again'),
      { ...chatLine('wrong-model', 'hi'), body: { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] } },
      { ...chatLine('wrong-url', 'hi'), url: '/v1/embeddings' },
      { ...chatLine('wrong-method', 'hi'), method: 'GET' },
    ];
    const created = await client.batches.create({ input_file_id: await upload(client, jsonl(lines)), endpoint: '/v1/chat/completions', completion_window: '24h' });
    const batch = await waitForBatch(client, created.id);
    expect(batch).toMatchObject({ status: 'failed', output_file_id: null, error_file_id: null, request_counts: { total: 0, completed: 0, failed: 0 } });
    expect(batch.failed_at).toEqual(expect.any(Number));
    expect(batch.errors?.object).toBe('list');
    expect(batch.errors?.data?.map((error) => [error.line, error.code, error.param])).toEqual([
      [2, 'invalid_json_line', null], [3, 'missing_custom_id', 'custom_id'], [4, 'duplicate_custom_id', 'custom_id'],
      [5, 'mismatched_model', 'body.model'], [6, 'invalid_url', 'url'], [7, 'invalid_method', 'method'],
    ]);
    // Nothing of it ran.
    const [{ count }] = await test.server.controlPlane.dataSource.query('SELECT count(*)::int AS count FROM batch_lines WHERE batch_id = $1', [batch.id]);
    expect(count).toBe(0);
    const empty = await client.batches.create({ input_file_id: await upload(client, Buffer.from('\n\n')), endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect((await waitForBatch(client, empty.id)).errors?.data?.[0]).toMatchObject({ code: 'empty_file', line: null });
  });

  it('deletes a file: gone from the listing, its content 404, and a batch cannot start from it', async () => {
    const fileId = await upload(client, jsonl([chatLine('x', 'y')]));
    expect(await client.files.delete(fileId)).toEqual({ id: fileId, object: 'file', deleted: true });
    expect(await client.files.retrieve(fileId).catch((error) => error.status)).toBe(404);
    expect(await client.files.content(fileId).catch((error) => error.status)).toBe(404);
    const refused = await client.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }).catch((error) => error);
    expect([refused.status, refused.param]).toEqual([400, 'input_file_id']);
  });

  it('another workspace (and another deployment) gets 404 on the files and batches, and lists none of them', async () => {
    const fileId = await upload(client, jsonl([chatLine('mine', 'secret words')]));
    const batch = await waitForBatch(client, (await client.batches.create({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    const theirs = await test.createDeployment(other);
    const base = theirs.baseUrl;
    const cases: Array<[string, string]> = [
      ['GET', `/files/${fileId}`], ['GET', `/files/${fileId}/content`], ['DELETE', `/files/${fileId}`], ['GET', `/files/${batch.output_file_id}/content`],
      ['GET', `/batches/${batch.id}`], ['POST', `/batches/${batch.id}/cancel`],
    ];
    for (const [method, path] of cases) {
      const answer = await call(method, `${base}${path}`, other.apiKey, method === 'POST' ? {} : undefined);
      expect({ path, status: answer.status, code: answer.json?.error?.code }).toEqual({ path, status: 404, code: 'not_found' });
      expect(answer.text).not.toContain('secret words');
    }
    expect((await call('GET', `${base}/files`, other.apiKey)).json.data).toEqual([]);
    expect((await call('GET', `${base}/batches`, other.apiKey)).json.data).toEqual([]);
    const usedByThem = await call('POST', `${base}/batches`, other.apiKey, { input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect([usedByThem.status, usedByThem.json.error.param]).toEqual([400, 'input_file_id']);
    // My own other deployment does not see them either: files and batches belong to one endpoint.
    const embeddingsAnswer = await call('GET', `${embedding.baseUrl}/files/${fileId}`, workspace.apiKey);
    expect(embeddingsAnswer.status).toBe(404);
    // The file is still mine.
    expect((await client.files.retrieve(fileId)).id).toBe(fileId);
  });

  it('files of both purposes: a missing or unknown purpose names both; content is JSONL for batch, octet-stream for user_data', async () => {
    const send = (parts: Record<string, string | Blob>) => {
      const data = new FormData();
      for (const [name, value] of Object.entries(parts)) {
        if (value instanceof Blob) data.append(name, value, 'weights.bin');
        else data.append(name, value);
      }
      return call('POST', `${chat.baseUrl}/files`, workspace.apiKey, data);
    };
    const weights = Buffer.from([0x47, 0x47, 0x55, 0x46, 0x00, 0xff, 0x10, 0x0a]);
    for (const purpose of [undefined, 'fine-tune']) {
      const refused = await send({ file: new Blob([weights]), ...(purpose ? { purpose } : {}) });
      expect(refused.status).toBe(400);
      expect(refused.json.error.param).toBe('purpose');
      expect(refused.json.error.message).toMatch(/"batch".*"user_data"/);
    }
    const uploaded = await send({ file: new Blob([weights]), purpose: 'user_data' });
    expect(uploaded.status).toBe(200);
    expect(uploaded.json).toMatchObject({ object: 'file', purpose: 'user_data', bytes: weights.length });
    const download = await fetch(`${chat.baseUrl}/files/${uploaded.json.id}/content`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await download.arrayBuffer())).toEqual(weights);
    const batchFile = await upload(client, jsonl([chatLine('a', 'b')]));
    const lines = await fetch(`${chat.baseUrl}/files/${batchFile}/content`, { headers: { authorization: `Bearer ${workspace.apiKey}` } });
    expect(lines.headers.get('content-type')).toMatch(/^application\/jsonl/);
    await lines.arrayBuffer();
  });

  it('answers bad input on every endpoint with a 400 naming the field', async () => {
    const key = workspace.apiKey;
    const base = chat.baseUrl;
    const form = (parts: Record<string, string | Blob>) => {
      const data = new FormData();
      for (const [name, value] of Object.entries(parts)) {
        if (value instanceof Blob) data.append(name, value, 'in.jsonl');
        else data.append(name, value);
      }
      return data;
    };
    const blob = new Blob([jsonl([chatLine('a', 'b')])]);
    const inputFileId = await upload(client, jsonl([chatLine('a', 'b')]));
    const finished = await waitForBatch(client, (await client.batches.create({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h' })).id);
    const cases: Array<[string, string, string, unknown, number, string | null]> = [
      ['POST /files as JSON', 'POST', '/files', { purpose: 'batch' }, 400, 'file'],
      ['POST /files without purpose', 'POST', '/files', form({ file: blob }), 400, 'purpose'],
      ['POST /files for fine-tuning', 'POST', '/files', form({ file: blob, purpose: 'fine-tune' }), 400, 'purpose'],
      ['POST /files without a file', 'POST', '/files', form({ purpose: 'batch' }), 400, 'file'],
      ['POST /files empty', 'POST', '/files', form({ file: new Blob([]), purpose: 'batch' }), 400, 'file'],
      ['POST /files expiring', 'POST', '/files', form({ file: blob, purpose: 'batch', 'expires_after[anchor]': 'created_at' }), 400, 'expires_after'],
      ['GET /files?limit=0', 'GET', '/files?limit=0', undefined, 400, 'limit'],
      ['GET /files?order=up', 'GET', '/files?order=up', undefined, 400, 'order'],
      ['GET /files?after=unknown', 'GET', '/files?after=file-000000000000000000000000', undefined, 400, 'after'],
      ['GET /files/{unknown}', 'GET', '/files/file-nope', undefined, 404, 'id'],
      ['POST /batches not JSON', 'POST', '/batches', '{"input_file_id":', 400, null],
      ['POST /batches without input_file_id', 'POST', '/batches', { endpoint: '/v1/chat/completions', completion_window: '24h' }, 400, 'input_file_id'],
      ['POST /batches unknown file', 'POST', '/batches', { input_file_id: 'file-123', endpoint: '/v1/chat/completions', completion_window: '24h' }, 400, 'input_file_id'],
      ['POST /batches output file as input', 'POST', '/batches', { input_file_id: finished.output_file_id, endpoint: '/v1/chat/completions', completion_window: '24h' }, 400, 'input_file_id'],
      ['POST /batches embeddings on chat', 'POST', '/batches', { input_file_id: inputFileId, endpoint: '/v1/embeddings', completion_window: '24h' }, 400, 'endpoint'],
      ['POST /batches without endpoint', 'POST', '/batches', { input_file_id: inputFileId, completion_window: '24h' }, 400, 'endpoint'],
      ['POST /batches 48h', 'POST', '/batches', { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '48h' }, 400, 'completion_window'],
      ['POST /batches metadata array', 'POST', '/batches', { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: ['x'] }, 400, 'metadata'],
      ['POST /batches metadata 17 keys', 'POST', '/batches', {
        input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h',
        metadata: Object.fromEntries(Array.from({ length: 17 }, (_, index) => [`k${index}`, 'v'])),
      }, 400, 'metadata'],
      ['POST /batches metadata number', 'POST', '/batches', { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { n: 1 } }, 400, 'metadata.n'],
      ['POST /batches metadata NUL', 'POST', '/batches', { input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', metadata: { n: 'a\u0000b' } }, 400, 'metadata'],
      ['POST /batches output_expires_after', 'POST', '/batches', {
        input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h', output_expires_after: { anchor: 'created_at', seconds: 3600 },
      }, 400, 'output_expires_after'],
      ['GET /batches?limit=101', 'GET', '/batches?limit=101', undefined, 400, 'limit'],
      ['GET /batches?limit=x', 'GET', '/batches?limit=x', undefined, 400, 'limit'],
      ['GET /batches?after=unknown', 'GET', '/batches?after=batch_000000000000000000000000', undefined, 400, 'after'],
      ['GET /batches/{unknown}', 'GET', '/batches/batch_nope', undefined, 404, 'id'],
      ['POST /batches/{finished}/cancel', 'POST', `/batches/${finished.id}/cancel`, {}, 409, 'id'],
    ];
    const outcomes = [];
    for (const [what, method, path, body, status, param] of cases) {
      const answer = await call(method, `${base}${path}`, key, body);
      outcomes.push({ what, status: answer.status, param: answer.json?.error?.param ?? null, type: typeof answer.json?.error?.message });
    }
    expect(outcomes).toEqual(cases.map(([what, , , , status, param]) => ({ what, status, param, type: 'string' })));
  });
});
