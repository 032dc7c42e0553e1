import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { EngineStartError } from '../../worker-agent/engines/engine-start-error';
import { ModelCache } from '../../worker-agent/engines/model-cache';
import { loadAgentOptions } from '../../worker-agent/agent-options';

const cleanups: Array<() => Promise<unknown> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function tempDir(): string {
  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'model-cache-test-'));
  cleanups.push(() => fs.rmSync(directory, { recursive: true, force: true }));
  return directory;
}

/** Serves `files` by path; counts the GETs each path got. */
async function fileServer(files: Record<string, Buffer>): Promise<{ url: string; gets: Map<string, number> }> {
  const gets = new Map<string, number>();
  const server = http.createServer((request, response) => {
    const route = (request.url ?? '').split('?')[0];
    gets.set(route, (gets.get(route) ?? 0) + 1);
    const body = files[route];
    if (!body) {
      response.writeHead(404).end('no such file');
      return;
    }
    response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length }).end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, gets };
}

const weights = Buffer.alloc(300_000, 7);
const sha256 = createHash('sha256').update(weights).digest('hex');

describe('the host\'s weights cache', () => {
  test('fetches a file once (checked against its sha256, progress reported); the next start finds it: a cache hit, no request', async () => {
    const server = await fileServer({ '/tiny.gguf': weights });
    const directory = tempDir();
    const fractions: number[] = [];
    const first = await new ModelCache({ directory, fetchTimeoutMs: 5_000 }).file({ url: `${server.url}/tiny.gguf`, sha256 }, (fraction) => fractions.push(fraction));
    expect(first).toEqual({ path: path.join(directory, 'files', `${sha256}.gguf`), bytes: weights.length, cacheHit: false });
    expect(fs.readFileSync(first.path).equals(weights)).toBe(true);
    expect(fractions.at(-1)).toBe(1);
    expect(fractions).toEqual([...fractions].sort((a, b) => a - b));
    // Another agent on the host (a new process: a new ModelCache on the same directory).
    const second = await new ModelCache({ directory, fetchTimeoutMs: 5_000 }).file({ url: `${server.url}/tiny.gguf`, sha256 });
    expect(second).toEqual({ path: first.path, bytes: weights.length, cacheHit: true });
    expect(server.gets.get('/tiny.gguf')).toBe(1);
    // No partial download left behind.
    expect(fs.readdirSync(path.join(directory, 'files'))).toEqual([`${sha256}.gguf`]);
  });

  test('without a sha256 a file is known by its URL without the query (a presigned URL\'s signature changes, the file does not)', async () => {
    const server = await fileServer({ '/m.gguf': weights });
    const cache = new ModelCache({ directory: tempDir(), fetchTimeoutMs: 5_000 });
    const first = await cache.file({ url: `${server.url}/m.gguf?X-Amz-Signature=one` });
    const second = await cache.file({ url: `${server.url}/m.gguf?X-Amz-Signature=two` });
    expect(first.cacheHit).toBe(false);
    expect(second).toEqual({ ...first, cacheHit: true });
    expect(server.gets.get('/m.gguf')).toBe(1);
  });

  test('a file that does not match its sha256, or an HTTP error, fails the start naming neither the query nor the file kept', async () => {
    const server = await fileServer({ '/tiny.gguf': weights });
    const directory = tempDir();
    const cache = new ModelCache({ directory, fetchTimeoutMs: 5_000 });
    const wrong = 'b'.repeat(64);
    const mismatch = cache.file({ url: `${server.url}/tiny.gguf?token=secret`, sha256: wrong });
    await expect(mismatch).rejects.toBeInstanceOf(EngineStartError);
    await expect(mismatch).rejects.toThrow(`the model file fetched from ${server.url}/tiny.gguf does not match its sha256`);
    const missing = cache.file({ url: `${server.url}/gone.gguf?token=secret` });
    await expect(missing).rejects.toThrow(`fetching the model file ${server.url}/gone.gguf answered HTTP 404`);
    const unreachable = cache.file({ url: 'http://127.0.0.1:1/x.gguf?token=secret' });
    await expect(unreachable).rejects.toThrow(/^the model file http:\/\/127\.0\.0\.1:1\/x\.gguf could not be fetched \(ECONNREFUSED\)$/);
    expect(fs.readdirSync(path.join(directory, 'files'))).toEqual([]);
  });

  test('names what it holds for the Hello: files labelled with the model they served, and the Hugging Face hub cache\'s models', async () => {
    const server = await fileServer({ '/tiny.gguf': weights });
    const directory = tempDir();
    const cache = new ModelCache({ directory, fetchTimeoutMs: 5_000 });
    expect(cache.cachedModels()).toEqual([]);
    await cache.file({ url: `${server.url}/tiny.gguf`, sha256 });
    // Not yet known as a catalog model: the Welcome says which.
    expect(cache.cachedModels()).toEqual([]);
    cache.servedAs('local/tiny');
    cache.servedAs('local/tiny');
    // What vLLM or SGLang leave with HF_HOME on the volume; an interrupted download (no snapshot) holds nothing.
    fs.mkdirSync(path.join(directory, 'hub', 'models--meta-llama--Llama-3.1-8B-Instruct', 'snapshots', 'abc123'), { recursive: true });
    fs.mkdirSync(path.join(directory, 'hub', 'models--gpt2', 'snapshots', 'def'), { recursive: true });
    fs.mkdirSync(path.join(directory, 'hub', 'models--Qwen--Qwen2.5-7B', 'blobs'), { recursive: true });
    fs.mkdirSync(path.join(directory, 'hub', 'datasets--org--set', 'snapshots', 'x'), { recursive: true });
    expect(new ModelCache({ directory, fetchTimeoutMs: 5_000 }).cachedModels()).toEqual(['gpt2', 'local/tiny', 'meta-llama/Llama-3.1-8B-Instruct']);
    // A file removed by hand is no longer claimed.
    fs.rmSync(path.join(directory, 'files', `${sha256}.gguf`));
    expect(cache.cachedModels()).toEqual(['gpt2', 'meta-llama/Llama-3.1-8B-Instruct']);
  });

  test('agent options: llama-cpp takes a model path or a URL (not both); a sha256 checks a fetched file only', () => {
    const base = { WORKER_CONTROL_PLANE: 'cp:50051', WORKER_JOIN_TOKEN: 'jt', WORKER_ENGINE: 'llama-cpp' };
    const fromUrl = loadAgentOptions([], { ...base, WORKER_LLAMA_MODEL_URL: 'https://models.example/tiny.gguf', WORKER_LLAMA_MODEL_SHA256: sha256, WORKER_MODEL_CACHE_DIR: '/var/cache/models' });
    expect(fromUrl).toMatchObject({ llamaModelUrl: 'https://models.example/tiny.gguf', llamaModelSha256: sha256, modelCacheDir: '/var/cache/models', engineWarmUp: 'off' });
    expect(() => loadAgentOptions([], base)).toThrow('--model-path / WORKER_LLAMA_MODEL_PATH or --model-url / WORKER_LLAMA_MODEL_URL is required with --engine llama-cpp');
    expect(() => loadAgentOptions([], { ...base, WORKER_LLAMA_MODEL_PATH: '/m.gguf', WORKER_LLAMA_MODEL_URL: 'https://models.example/m.gguf' })).toThrow('not both');
    expect(() => loadAgentOptions([], { ...base, WORKER_LLAMA_MODEL_PATH: '/m.gguf', WORKER_LLAMA_MODEL_SHA256: sha256 })).toThrow('it needs --model-url');
    expect(() => loadAgentOptions([], { ...base, WORKER_LLAMA_MODEL_URL: 'ftp://x/m.gguf' })).toThrow(/WORKER_LLAMA_MODEL_URL/);
    expect(() => loadAgentOptions([], { ...base, WORKER_LLAMA_MODEL_URL: 'https://x/m.gguf', WORKER_LLAMA_MODEL_SHA256: 'abc' })).toThrow('--model-sha256 / WORKER_LLAMA_MODEL_SHA256: must be 64 hex digits');
    expect(() => loadAgentOptions(['--engine-warm-up', 'maybe'], { ...base, WORKER_LLAMA_MODEL_PATH: '/m.gguf' })).toThrow(/--engine-warm-up \/ WORKER_ENGINE_WARM_UP/);
  });
});
