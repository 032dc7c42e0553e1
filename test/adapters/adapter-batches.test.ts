import OpenAI, { toFile } from 'openai';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startTestServer, waitFor, type TestDeployment, type TestServer, type TestWorkspace } from '../support/test-server';
import { graphqlAs } from '../security/support/security-client';
import { loraGguf } from './support/lora-files';
import { chatLine, fileLines, jsonl, upload, waitForBatch } from '../batches/support/batch-helpers';

const ADAPTER = 'support-bot';
const LATE = 'late-bot';

/**
 * Batch lines addressed to a LoRA adapter (docs/adapters.md#addressing), end to end with a real
 * agent on the built-in CPU engine: a line naming an adapter attached to the batch's deployment
 * runs as that adapter's job (its answer names the adapter, its usage record carries it) beside
 * lines of the base model; a file refused while an adapter was not attached passes once it is.
 * (Another workspace's adapter name failing as a made-up model: adapter-addressing.test.ts.)
 */
describe('batch lines addressed to adapters', () => {
  let server: TestServer;
  let owner: TestWorkspace;
  let deployment: TestDeployment;
  let client: OpenAI;
  let asOwner: ReturnType<typeof graphqlAs>;
  let adapterId: string;
  let lateId: string;
  let baseModel: string;

  const create = async (name: string) => {
    const file = await client.files.create({ file: await toFile(loraGguf({ rank: 8 }), `${name}.gguf`), purpose: 'user_data' });
    const created = await asOwner('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name, baseModel, fileId: file.id } });
    expect(created.body.errors).toBeUndefined();
    return created.body.data!.createAdapter.id as string;
  };
  const attach = async (id: string) => {
    const attached = await asOwner('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: id, d: deployment.id });
    expect(attached.body.errors).toBeUndefined();
  };
  const runBatch = async (fileId: string, endpoint: '/v1/chat/completions' | '/v1/responses') =>
    await waitForBatch(client, (await client.batches.create({ input_file_id: fileId, endpoint, completion_window: '24h' })).id);

  beforeAll(async () => {
    server = await startTestServer({ controlPlane: { batches: { pollIntervalMs: 100, sweepIntervalMs: 200, progressIntervalMs: 50 } } });
    owner = await server.createWorkspace();
    deployment = await server.createDeployment(owner);
    baseModel = server.server.controlPlane.catalog.defaultChatModel().id;
    await server.waitForReplicas(deployment.id, 1);
    client = new OpenAI({ apiKey: owner.apiKey, baseURL: deployment.baseUrl, maxRetries: 0 });
    asOwner = graphqlAs(server.url, owner.apiKey);
    adapterId = await create(ADAPTER);
    await attach(adapterId);
    lateId = await create(LATE);
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  test('chat lines naming the adapter run as its jobs beside base-model lines: answers name it, usage carries it', async () => {
    const file = await upload(client, jsonl([
      chatLine('adapter-1', 'hello', { model: ADAPTER }), chatLine('base', 'hello', { model: baseModel }),
      chatLine('adapter-2', 'again', { model: ADAPTER }), chatLine('unnamed', 'hello'),
    ]));
    const batch = await runBatch(file, '/v1/chat/completions');
    expect(batch.status).toBe('completed');
    expect(batch.request_counts).toMatchObject({ total: 4, completed: 4, failed: 0 });
    const answers = Object.fromEntries((await fileLines(client, batch.output_file_id)).map((line) => [line.custom_id, line.response]));
    expect(Object.fromEntries(Object.entries(answers).map(([id, response]) => [id, [response.status_code, response.body.model]]))).toEqual({
      'adapter-1': [200, ADAPTER], 'adapter-2': [200, ADAPTER], base: [200, baseModel], unnamed: [200, baseModel],
    });
    const records = server.server.controlPlane.dataSource.getRepository(UsageRecord);
    await waitFor(async () => (await records.count({ where: { batchId: batch.id } })) === 4, 5_000, 'the batch\'s usage records');
    expect(await records.count({ where: { batchId: batch.id, adapterId } })).toBe(2);
  });

  test('a responses line naming the adapter answers with its name', async () => {
    const line = { custom_id: 'r-1', method: 'POST', url: '/v1/responses', body: { model: ADAPTER, input: 'hello', max_output_tokens: 16 } };
    const batch = await runBatch(await upload(client, jsonl([line])), '/v1/responses');
    expect(batch.status).toBe('completed');
    const [answer] = await fileLines(client, batch.output_file_id);
    expect(answer.response).toMatchObject({ status_code: 200, body: { object: 'response', model: ADAPTER } });
  });

  test('a file refused while its adapter was not attached passes once it is (the remembered failure does not stick)', async () => {
    const file = await upload(client, jsonl([chatLine('late-1', 'hello', { model: LATE })]));
    const refused = await runBatch(file, '/v1/chat/completions');
    expect(refused.status).toBe('failed');
    expect(refused.errors?.data?.map((error) => [error.code, error.param, error.line])).toEqual([['mismatched_model', 'body.model', 1]]);
    await attach(lateId);
    const ran = await runBatch(file, '/v1/chat/completions');
    expect(ran.status).toBe('completed');
    const [answer] = await fileLines(client, ran.output_file_id);
    expect(answer.response).toMatchObject({ status_code: 200, body: { model: LATE } });
  });
});
