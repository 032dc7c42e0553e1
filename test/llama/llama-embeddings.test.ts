import OpenAI from 'openai';
import { tinyTokenCount } from '../../worker-agent/llama/tiny-gguf';
import { startTestServer, type TestServer } from '../support/test-server';
import { modelDirectory, type ModelDirectory } from './support/tiny-model';

const CONTEXT_SIZE = 256;
const MODEL_ID = 'local/tiny-embed';
/** The chat variant of the same network (same seed) served as embeddings: llama.cpp takes its last token's state. */
const LAST_TOKEN_MODEL_ID = 'local/tiny-last-token';

/**
 * Real embeddings through the platform: client → gateway → gRPC → agent process → llama.cpp's
 * embedding context on a tiny GGUF model written at test time (a byte-level tokenizer: one
 * token per byte, so usage is the tokenizer's own count, checkable here).
 */
describe('llama.cpp embeddings', () => {
  let models: ModelDirectory;
  let test: TestServer;
  let client: OpenAI;
  let lastTokenClient: OpenAI;

  beforeAll(async () => {
    models = modelDirectory();
    test = await startTestServer({ controlPlane: { localLlamaThreads: 1, localLlamaContextSize: CONTEXT_SIZE, localLlamaParallel: 1 } });
    const workspace = await test.createWorkspace();
    const deploy = async (id: string, file: string) => {
      test.server.controlPlane.catalog.register({
        id, name: 'tiny embedding model', modality: 'text', task: 'embedding', engine: 'llama-cpp', official: false,
        gpuMemoryGb: 0.1, inputModalities: ['text'], sizes: [], targetConcurrency: 1, source: { kind: 'gguf', path: file },
        embedding: { dimensions: 64, maxInputTokens: 128, maxBatchInputs: 8 },
      });
      const deployment = await test.createDeployment(workspace, { modelId: id });
      await test.waitForReplicas(deployment.id, 1, 30_000);
      return new OpenAI({ baseURL: deployment.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    };
    client = await deploy(MODEL_ID, models.write('tiny-embed.gguf', { contextLength: CONTEXT_SIZE, variant: 'embedding' }));
    lastTokenClient = await deploy(LAST_TOKEN_MODEL_ID, models.write('tiny-chat.gguf', { contextLength: CONTEXT_SIZE }));
  });

  afterAll(async () => {
    await test?.stop();
    models?.remove();
  });

  it('answers unit vectors of the model\'s width, the same for the same input, with the tokenizer\'s count as usage', async () => {
    const inputs = ['hello world', 'another text', 'hello world'];
    const answer = await client.embeddings.create({ input: inputs, encoding_format: 'float' });
    expect(answer.data.map((item) => item.index)).toEqual([0, 1, 2]);
    for (const item of answer.data) {
      expect(item.embedding).toHaveLength(64);
      expect(Math.hypot(...item.embedding)).toBeCloseTo(1, 4);
    }
    expect(answer.data[2].embedding).toEqual(answer.data[0].embedding);
    expect(answer.data[1].embedding).not.toEqual(answer.data[0].embedding);
    const tokens = inputs.reduce((sum, input) => sum + tinyTokenCount(input), 0);
    expect(answer.usage).toEqual({ prompt_tokens: tokens, total_tokens: tokens });
  });

  it('the generated embedding variant mean-pools: one token gives the last-token vector, "ab" lies between the states of "a" and "ab"', async () => {
    const embed = async (target: OpenAI, input: string[]) => (await target.embeddings.create({ input, encoding_format: 'float' })).data.map((item) => item.embedding);
    const [meanA, meanAB] = await embed(client, ['a', 'ab']);
    const [lastA, lastAB] = await embed(lastTokenClient, ['a', 'ab']);
    // One token: its mean is itself.
    meanA.forEach((value, index) => expect(value).toBeCloseTo(lastA[index], 5));
    // Two tokens, causal attention: mean("ab") ∝ state(a) + state(b after a), which the
    // last-token model gives (scaled to unit length) as its vectors for "a" and "ab". So
    // mean("ab") is a combination of those two, and is neither of them.
    const dot = (x: number[], y: number[]) => x.reduce((sum, value, index) => sum + value * y[index], 0);
    const g = dot(lastA, lastAB);
    const [p, q] = [dot(meanAB, lastA), dot(meanAB, lastAB)];
    const alpha = (p - g * q) / (1 - g * g);
    const beta = (q - g * p) / (1 - g * g);
    const residual = Math.hypot(...meanAB.map((value, index) => value - alpha * lastA[index] - beta * lastAB[index]));
    expect(residual).toBeLessThan(1e-4);
    expect(alpha).toBeGreaterThan(0.05);
    expect(beta).toBeGreaterThan(0.05);
  });

  it('keeps the order across batches and decodes base64 to the float vectors', async () => {
    const inputs = Array.from({ length: 20 }, (_, index) => `passage ${index}`);
    const floats = await client.embeddings.create({ input: inputs, encoding_format: 'float' });
    const base64 = await client.embeddings.create({ input: inputs });
    expect(base64.data.map((item) => item.embedding)).toEqual(floats.data.map((item) => item.embedding));
    const alone = await client.embeddings.create({ input: inputs[17], encoding_format: 'float' });
    expect(floats.data[17].embedding).toEqual(alone.data[0].embedding);
  });

  it('refuses an input over the limit with a 400 naming it', async () => {
    const error = await client.embeddings.create({ input: ['short', 'x'.repeat(200)] }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    expect((error as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('input[1]');
    expect((error as Error).message).toMatch(/input\[1\] is 200 tokens, over the model's limit of 128 input tokens/);
  });
});
