import OpenAI, { toFile } from 'openai';
import sharp from 'sharp';
import { startTestServer, type TestServer, type TestWorkspace } from '../support/test-server';

const IMAGE_MODEL = 'black-forest-labs/FLUX.1-schnell';
const EDIT_MODEL = 'black-forest-labs/FLUX.1-Kontext-dev';

describe('images (sync) through the official SDK', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let generation: { id: string; baseUrl: string };
  let edit: { id: string; baseUrl: string };

  beforeAll(async () => {
    test = await startTestServer({ controlPlane: { localAgentEnv: { WORKER_CPU_TEST_CONTROLS: 'true' } } });
    workspace = await test.createWorkspace();
    generation = await test.createDeployment(workspace, { modelId: IMAGE_MODEL });
    edit = await test.createDeployment(workspace, { modelId: EDIT_MODEL });
    await test.waitForReplicas(generation.id, 1);
    await test.waitForReplicas(edit.id, 1);
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('generates decodable PNGs at the requested size, as signed links', async () => {
    const client = new OpenAI({ baseURL: generation.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const result = await client.images.generate({ model: IMAGE_MODEL, prompt: 'a lighthouse at dusk', n: 2, size: '512x512' });
    expect(result.data).toHaveLength(2);
    for (const item of result.data!) {
      const response = await fetch(item.url!);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toBe('image/png');
      const metadata = await sharp(Buffer.from(await response.arrayBuffer())).metadata();
      expect([metadata.format, metadata.width, metadata.height]).toEqual(['png', 512, 512]);
    }
  });

  it('returns b64_json inline, deterministic for a seed', async () => {
    const client = new OpenAI({ baseURL: generation.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const ask = () => client.images.generate({ model: IMAGE_MODEL, prompt: 'a red fox', size: '512x512', response_format: 'b64_json', seed: 7 } as never);
    const [first, second] = [await ask(), await ask()];
    const image = Buffer.from(first.data![0].b64_json!, 'base64');
    expect((await sharp(image).metadata()).width).toBe(512);
    expect(first.data![0].b64_json).toBe(second.data![0].b64_json);
  });

  it('edits an image: the output derives from the input', async () => {
    const client = new OpenAI({ baseURL: edit.baseUrl, apiKey: workspace.apiKey, maxRetries: 0 });
    const input = await sharp({ create: { width: 600, height: 400, channels: 3, background: '#2040c0' } }).png().toBuffer();
    const result = await client.images.edit({
      model: EDIT_MODEL, prompt: 'make it sunset', size: '512x512', response_format: 'b64_json',
      image: await toFile(input, 'input.png', { type: 'image/png' }),
    });
    const output = Buffer.from(result.data![0].b64_json!, 'base64');
    const stats = await sharp(output).stats();
    expect((await sharp(output).metadata()).width).toBe(512);
    // The blue input stays visible in the edit: blue dominates the average colour.
    expect(stats.channels[2].mean).toBeGreaterThan(stats.channels[0].mean);
  });
});
