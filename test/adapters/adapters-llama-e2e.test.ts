/**
 * Issue 38 end to end on real llama.cpp (threads 1): a whole server whose local agent runs the
 * tiny GGUF model written at test time, and GGUF LoRA adapters generated beside it
 * (tiny-lora-gguf.ts), through the public surfaces only: the official SDK's Files API uploads
 * them, GraphQL registers and attaches them, and the SDK addresses them by `model`. Greedy
 * answers tell the base model and each adapter apart; residency, a malformed adapter and a new
 * revision are seen as a client sees them.
 */
import OpenAI, { APIError, toFile } from 'openai';
import { deploymentForSuite, waitFor } from '../support/test-server';
import { graphqlAs, type GraphQLAnswer } from '../security/support/security-client';
import { modelDirectory, type ModelDirectory } from '../llama/support/tiny-model';
import { tinyLoraGguf, type TinyLoraOptions } from '../../worker-agent/llama/tiny-lora-gguf';

const BASE = 'meta-llama/Llama-3.1-8B-Instruct';
let models: ModelDirectory;

describe('LoRA adapters end to end on llama.cpp', () => {
  const suite = deploymentForSuite(() => {
    models = modelDirectory();
    // LOCAL_ENGINE=llama-cpp serves every text model on this file; Llama-3.1's catalog architecture (llama) is the tiny model's.
    const modelPath = models.write('tiny-e2e.gguf', { contextLength: 1024 });
    return {
      controlPlane: { localEngine: 'llama-cpp', localModelPath: modelPath, localLlamaThreads: 1, localLlamaContextSize: 256, localLlamaParallel: 3 },
      deployment: { modelId: BASE, maxLoras: 2 },
      readyTimeoutMs: 60_000,
    };
  }, 90_000);
  afterAll(() => models?.remove());

  const gql = () => graphqlAs(suite.test.url, suite.workspace.apiKey);
  const data = (answer: GraphQLAnswer) => {
    expect(answer.body.errors).toBeUndefined();
    return answer.body.data as Record<string, any>;
  };
  const upload = async (options: TinyLoraOptions, name: string) =>
    (await suite.client.files.create({ file: await toFile(tinyLoraGguf(options), `${name}.gguf`), purpose: 'user_data' })).id;
  /** Uploads, registers and attaches an adapter; its id. */
  const adapter = async (name: string, options: TinyLoraOptions): Promise<string> => {
    const fileId = await upload(options, name);
    const id = data(await gql()('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name, baseModel: BASE, fileId } })).createAdapter.id;
    data(await gql()('mutation($a: ID!, $d: ID!) { attachAdapter(adapterId: $a, deploymentId: $d) { id } }', { a: id, d: suite.deployment.id }));
    return id;
  };
  const ask = async (model: string) => {
    const answer = await suite.client.chat.completions.create({ model, messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 12, temperature: 0 });
    return { model: answer.model, text: answer.choices[0].message.content };
  };
  const failure = async (model: string) => {
    const error = await ask(model).then(() => null, (caught: unknown) => caught);
    expect(error).toBeInstanceOf(APIError);
    const { status, code, param, message } = error as APIError;
    return { status, code, param, message };
  };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    ids.alpha = await adapter('alpha', { seed: 11 });
    ids.beta = await adapter('beta', { seed: 22 });
    ids.gamma = await adapter('gamma', { seed: 33 });
  }, 30_000);

  test('greedy answers: the base model and two adapters give three outputs, each under the model asked for', async () => {
    const base = await ask(BASE);
    const alpha = await ask('alpha');
    const beta = await ask('beta');
    expect([base.model, alpha.model, beta.model]).toEqual([BASE, 'alpha', 'beta']);
    expect(new Set([base.text, alpha.text, beta.text]).size).toBe(3);
    // Greedy: asked again, each answers the same.
    expect(await ask('alpha')).toEqual(alpha);
    expect(await ask(BASE)).toEqual(base);
  });

  test('Adapter.residency shows the adapter GPU-resident on the replica, with its load time', async () => {
    await ask('alpha');
    const replicas = suite.test.server.controlPlane.dispatcher.connections(suite.deployment.id).map((connection) => connection.replicaId);
    expect(replicas).toHaveLength(1);
    const residency = async () => data(await gql()('query($id: ID!) { adapter(id: $id) { residency { replicaId deploymentId revision state loadMs } } }', { id: ids.alpha })).adapter.residency;
    // The agent reports it on its next heartbeat.
    let rows: Array<Record<string, unknown>> = [];
    await waitFor(async () => (rows = await residency()).some((row) => row.state === 'GPU'), 15_000, 'alpha GPU-resident in Adapter.residency');
    expect(rows).toEqual([{ replicaId: replicas[0], deploymentId: suite.deployment.id, revision: 1, state: 'GPU', loadMs: expect.any(Number) }]);
    expect(rows[0].loadMs).toBeGreaterThan(0);
  });

  test('3 concurrent requests for 3 adapters on one replica holding 2 all complete, each as it answers alone', async () => {
    const alone = [await ask('alpha'), await ask('beta'), await ask('gamma')];
    const together = await Promise.all(['alpha', 'beta', 'gamma'].map((model) => ask(model)));
    expect(together).toEqual(alone);
  });

  test('registration refuses what it can see; a load failure the agent catches is a 422 adapter_load_failed naming model, and the rest keeps answering', async () => {
    // alpha as a 32-bit integer: the platform reads the header and refuses it before any replica sees it.
    const integerAlpha = await upload({ seed: 44, malformed: 'integer-alpha' }, 'integer-alpha');
    const refused = await gql()('mutation($input: CreateAdapterInput!) { createAdapter(input: $input) { id } }', { input: { name: 'integer-alpha', baseModel: BASE, fileId: integerAlpha } });
    expect(refused.body.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', param: 'fileId' });
    // Shapes for a wider model of the same architecture: only the agent, which has the base model, can tell.
    await adapter('wider', { seed: 55, embeddingLength: 128 });
    const failed = await failure('wider');
    expect(failed).toMatchObject({ status: 422, code: 'adapter_load_failed', param: 'model' });
    expect(failed.message).toContain('wider');
    expect(failed.message).not.toMatch(/https?:|\/tmp|\.gguf/);
    // Tried again on the next request, failing the same way; the base model and the other adapters keep answering.
    expect(await failure('wider')).toMatchObject({ status: 422, code: 'adapter_load_failed' });
    expect((await ask(BASE)).model).toBe(BASE);
    expect((await ask('beta')).model).toBe('beta');
    expect((await ask('gamma')).model).toBe('gamma');
  });

  test('new weights (updateAdapterWeights) change the answer of new requests', async () => {
    const before = await ask('beta');
    const fileId = await upload({ seed: 66 }, 'beta-r2');
    const revised = data(await gql()('mutation($id: ID!, $input: AdapterWeightsInput!) { updateAdapterWeights(id: $id, input: $input) { revision } }', { id: ids.beta, input: { fileId } }));
    expect(revised.updateAdapterWeights.revision).toBe(2);
    const after = await ask('beta');
    expect(after.model).toBe('beta');
    expect(after.text).not.toBe(before.text);
    // The others are untouched.
    expect((await ask('alpha')).model).toBe('alpha');
  });
});
