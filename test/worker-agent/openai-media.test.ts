import http from 'node:http';
import type net from 'node:net';
import sharp from 'sharp';
import { EngineFailure } from '../../worker-agent/engines/engine-failure';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';

/** A scripted OpenAI-compatible image server: the boundary we do not own. */
async function startImageEngine() {
  const seen: Array<{ path: string; contentType: string; body: Buffer }> = [];
  const jpeg = await sharp({ create: { width: 64, height: 32, channels: 3, background: '#3366cc' } }).jpeg().toBuffer();
  const server = http.createServer((request, response) => {
    const parts: Buffer[] = [];
    request.on('data', (part) => parts.push(part));
    request.on('end', () => {
      const body = Buffer.concat(parts);
      seen.push({ path: request.url ?? '', contentType: request.headers['content-type'] ?? '', body });
      const text = body.toString('utf8');
      if (text.includes('#oom')) {
        response.writeHead(500, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'CUDA out of memory. Tried to allocate 4.00 GiB' } }));
        return;
      }
      if (text.includes('#bad')) {
        response.writeHead(400, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ error: { message: 'size is not supported', param: 'size' } }));
        return;
      }
      const n = request.url?.includes('edits') ? 1 : (JSON.parse(text) as { n: number }).n;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ created: 1, data: Array.from({ length: n }, () => ({ b64_json: jpeg.toString('base64') })) }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen, close: () => new Promise((resolve) => server.close(resolve)) };
}

describe('openai engine adapter: image jobs', () => {
  let engineServer: Awaited<ReturnType<typeof startImageEngine>>;
  let engine: OpenAiEngine;

  beforeAll(async () => {
    engineServer = await startImageEngine();
    engine = new OpenAiEngine({ url: engineServer.url, engineModel: 'flux-dev', connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000 });
  });

  afterAll(async () => {
    await engine.close();
    await engineServer.close();
  });

  const job = (kind: 'JOB_KIND_IMAGE_GENERATION' | 'JOB_KIND_IMAGE_EDIT', prompt: string, inputs = new Map<string, Buffer>()) => ({
    jobId: 'job_1', kind, model: 'black-forest-labs/FLUX.1-schnell', inputs,
    params: { prompt, n: 2, size: '512x512', width: 512, height: 512, response_format: 'url', seed: 7, steps: 4 },
  });

  it('asks for b64_json with the engine model name and the extensions, and returns PNGs', async () => {
    const result = await engine.generateMedia(job('JOB_KIND_IMAGE_GENERATION', 'a fox'), () => {}, new JobCancellation());
    expect(result.contentType).toBe('image/png');
    expect(result.files).toHaveLength(2);
    expect((await sharp(result.files[0]).metadata()).format).toBe('png');
    const sent = JSON.parse(engineServer.seen.at(-1)!.body.toString('utf8'));
    expect(sent).toMatchObject({ model: 'flux-dev', prompt: 'a fox', n: 2, size: '512x512', response_format: 'b64_json', seed: 7, steps: 4 });
    expect(engineServer.seen.at(-1)!.path).toBe('/v1/images/generations');
  });

  it('sends edits as multipart with the image file', async () => {
    const image = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#ffffff' } }).png().toBuffer();
    const result = await engine.generateMedia(job('JOB_KIND_IMAGE_EDIT', 'brighter', new Map([['image', image]])), () => {}, new JobCancellation());
    expect(result.files).toHaveLength(1);
    const sent = engineServer.seen.at(-1)!;
    expect(sent.path).toBe('/v1/images/edits');
    expect(sent.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(sent.body.includes(image)).toBe(true);
    expect(sent.body.toString('latin1')).toContain('name="prompt"');
  });

  it('maps an out-of-memory answer to vram_exceeded and a 4xx to engine_rejected; refuses videos', async () => {
    const oom = await engine.generateMedia(job('JOB_KIND_IMAGE_GENERATION', '#oom'), () => {}, new JobCancellation()).catch((error) => error);
    expect(oom).toBeInstanceOf(EngineFailure);
    expect(oom.code).toBe('vram_exceeded');
    const bad = await engine.generateMedia(job('JOB_KIND_IMAGE_GENERATION', '#bad'), () => {}, new JobCancellation()).catch((error) => error);
    expect(bad).toMatchObject({ code: 'engine_rejected', engineStatus: 400 });
    const video = await engine.generateMedia({ ...job('JOB_KIND_IMAGE_GENERATION', 'x'), kind: 'JOB_KIND_VIDEO_GENERATION' }, () => {}, new JobCancellation()).catch((error) => error);
    expect(video.code).toBe('invalid_job');
  });
});
