import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AdapterStore } from '../../worker-agent/engines/adapter-store';
import { tinyLoraGguf } from '../../worker-agent/llama/tiny-lora-gguf';
import { AdapterFileServer, peftSafetensors, ustar } from './support/adapter-files';

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'adapter-store-test-'));
let files: AdapterFileServer;
beforeAll(async () => { files = await AdapterFileServer.start(); });
afterAll(async () => {
  await files.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

function store(name: string, maxBytes = 1 << 30): AdapterStore {
  return new AdapterStore({ directory: path.join(directory, name), maxBytes, fetchTimeoutMs: 5_000 });
}

describe('AdapterStore', () => {
  it('fetches a GGUF adapter once for concurrent jobs, checks it, and keeps it by checksum', async () => {
    const bytes = tinyLoraGguf({ seed: 5 });
    const ref = files.add('once.gguf', bytes, 'once');
    files.delayMs = 100;
    const cache = store('once');
    const local = await Promise.all([cache.materialize(ref), cache.materialize(ref), cache.materialize(ref)]);
    files.delayMs = 0;
    expect(files.requests.get('once.gguf')).toBe(1);
    expect(new Set(local.map((entry) => entry.path)).size).toBe(1);
    expect(local[0].path).toBe(path.join(directory, 'once', `${ref.sha256}.gguf`));
    expect(fs.readFileSync(local[0].path).equals(bytes)).toBe(true);
    // Another revision with the same bytes is the same file, not a second fetch.
    await cache.materialize({ ...ref, name: 'once.r2' });
    expect(files.requests.get('once.gguf')).toBe(1);
    expect(fs.readdirSync(path.join(directory, 'once'))).toEqual([`${ref.sha256}.gguf`]);
  });

  it('refuses weights that do not match their sha256 or size, and a failed fetch, as 502 without the URL', async () => {
    const cache = store('bad');
    const bytes = tinyLoraGguf({ seed: 6 });
    const ref = files.add('bad.gguf', bytes, 'bad');
    const failures: Array<{ code: string; engineStatus: number; message: string }> = [];
    // One after the other: fetches of one checksum at the same time share the first one's outcome.
    for (const bad of [
      { ...ref, sha256: 'a'.repeat(64) },
      { ...ref, sizeBytes: bytes.length - 1 },
      { ...ref, sizeBytes: bytes.length + 1 },
      { ...ref, source: `${files.url}/missing.gguf?X-Amz-Signature=secret` },
      { ...ref, source: 'http://127.0.0.1:1/unreachable?X-Amz-Signature=secret' },
    ]) failures.push(await cache.materialize(bad).catch((error: unknown) => error) as typeof failures[number]);
    expect(failures.map((failure) => [failure.code, failure.engineStatus])).toEqual(Array(5).fill(['adapter_load_failed', 502]));
    expect(failures.map((failure) => failure.message)).toEqual([
      'adapter bad: the fetched weights do not match their sha256',
      `adapter bad: its weights are larger than the ${bytes.length - 1} bytes expected`,
      `adapter bad: fetched ${bytes.length} bytes, expected ${bytes.length + 1}`,
      'adapter bad: fetching its weights answered HTTP 404',
      'adapter bad: its weights could not be fetched (ECONNREFUSED)',
    ]);
    for (const failure of failures) expect(failure.message).not.toMatch(/http|secret|127\.0\.0\.1/);
    // Nothing half-written is left behind.
    expect(fs.readdirSync(path.join(directory, 'bad'))).toEqual([]);
  });

  it('unpacks a PEFT tar (in a folder) into a directory an engine loads, and gives a lone safetensors file its config', async () => {
    const cache = store('peft');
    const config = { peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj'], base_model_name_or_path: 'tiny' };
    const tar = ustar({ 'my-adapter/adapter_config.json': JSON.stringify(config), 'my-adapter/adapter_model.safetensors': peftSafetensors() });
    const peft = await cache.materialize(files.add('peft.tar', tar, 'peft', 'ADAPTER_FORMAT_PEFT_TAR'));
    expect(fs.readdirSync(peft.path).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    expect(JSON.parse(fs.readFileSync(path.join(peft.path, 'adapter_config.json'), 'utf8'))).toEqual(config);
    const lone = await cache.materialize(files.add('lone.safetensors', peftSafetensors(), 'lone', 'ADAPTER_FORMAT_SAFETENSORS'));
    expect(JSON.parse(fs.readFileSync(path.join(lone.path, 'adapter_config.json'), 'utf8'))).toMatchObject({ peft_type: 'LORA', r: 8, lora_alpha: 8, target_modules: ['q_proj'] });
    // A tar that is not a PEFT adapter is malformed: 422.
    await expect(cache.materialize(files.add('junk.tar', ustar({ 'readme.txt': 'hi' }), 'junk', 'ADAPTER_FORMAT_PEFT_TAR')))
      .rejects.toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
  });

  it('keeps its disk use under the limit by deleting the least recently used files nobody holds', async () => {
    const one = tinyLoraGguf({ seed: 7 });
    const cache = store('lru', Math.floor(one.length * 2.5));
    const refs = [1, 2, 3].map((seed) => files.add(`lru-${seed}.gguf`, tinyLoraGguf({ seed: 7 + seed * 100 }), `lru${seed}`));
    const first = await cache.materialize(refs[0]);
    cache.hold(first.key);
    await cache.materialize(refs[1]);
    await cache.materialize(refs[2]);
    // Three do not fit: the held first one stays, the least recently used of the others goes.
    expect(fs.existsSync(first.path)).toBe(true);
    expect(fs.readdirSync(path.join(directory, 'lru')).sort()).toEqual([refs[0].sha256, refs[2].sha256].map((sha) => `${sha}.gguf`).sort());
    expect(cache.usedBytes).toBeLessThanOrEqual(one.length * 2.5);
    // Released, the first counts as just used: the third is now the least recent one.
    cache.release(first.key);
    await cache.materialize(refs[1]);
    expect(files.requests.get('lru-2.gguf')).toBe(2);
    expect(fs.readdirSync(path.join(directory, 'lru')).sort()).toEqual([refs[0].sha256, refs[1].sha256].map((sha) => `${sha}.gguf`).sort());
  });
});
