import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { tinyGguf } from '../../worker-agent/llama/tiny-gguf';

const DIST = path.resolve(__dirname, '../../dist/worker-agent');

/**
 * Starts compiled llama-cpp engines one after another in a plain Node process (node-llama-cpp is
 * ESM: jest cannot import it), each with its own phase recorder, and prints what each start did.
 */
const SCRIPT = `
const { LlamaCppEngine } = require(${JSON.stringify(`${DIST}/llama/llama-cpp-engine.js`)});
const { ModelCache } = require(${JSON.stringify(`${DIST}/engines/model-cache.js`)});
const { StartupPhases } = require(${JSON.stringify(`${DIST}/startup-phases.js`)});
const { silentLogger } = require(${JSON.stringify(`${DIST}/agent-logger.js`)});
(async () => {
  const results = [];
  for (const start of JSON.parse(process.argv[1])) {
    const options = { threads: 1, parallel: 1, contextSize: 256, modelPath: start.modelPath };
    if (start.url) Object.assign(options, { modelSource: { url: start.url, sha256: start.sha256 }, modelCache: new ModelCache({ directory: start.cacheDir, fetchTimeoutMs: 10000 }) });
    const engine = new LlamaCppEngine(options, silentLogger);
    const phases = new StartupPhases();
    const progress = [];
    let error = null;
    try {
      await engine.prepare();
      await engine.start((percent, stage) => progress.push([percent, stage]), phases);
    } catch (failure) {
      error = { name: failure.name, message: failure.message };
    }
    results.push({ phases: phases.frames(), progress, error, health: engine.health().status, models: engine.models() });
    await engine.close().catch(() => {});
  }
  process.stdout.write(JSON.stringify(results));
})().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
`;

interface StartResult {
  phases: Array<{ name: string; durationMs: number; done: boolean; detail: string; bytes: number }>;
  progress: Array<[number, string]>;
  error: { name: string; message: string } | null;
  health: string;
  models: string[];
}

async function runStarts(starts: Array<Record<string, unknown>>): Promise<StartResult[]> {
  const child = spawn(process.execPath, ['-e', SCRIPT, JSON.stringify(starts)], { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout.on('data', (chunk) => out.push(chunk));
  child.stderr.on('data', (chunk) => err.push(chunk));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`engine script exited ${code}: ${Buffer.concat(err).toString()}`);
  return JSON.parse(Buffer.concat(out).toString()) as StartResult[];
}

/**
 * The llama-cpp engine's start-up on real llama.cpp, phase by phase: its GGUF fetched from a URL
 * into the host's weights cache (`download`), or found there on the next start (a cache hit, no
 * request); the model loaded (`load`); one token decoded (`warm_up`). A file that does not load
 * stops the start in `load`, saying why.
 */
describe('llama.cpp start-up phases and the weights cache', () => {
  const model = tinyGguf();
  const sha256 = createHash('sha256').update(model).digest('hex');
  const notGguf = Buffer.from('this is not a GGUF file at all, just text '.repeat(20));
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'llama-cache-test-'));
  const gets = new Map<string, number>();
  let server: http.Server;
  let results: StartResult[];
  let url: string;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      const route = request.url ?? '';
      gets.set(route, (gets.get(route) ?? 0) + 1);
      const body = route === '/models/tiny.gguf' ? model : route === '/models/broken.gguf' ? notGguf : null;
      if (!body) {
        response.writeHead(404).end();
        return;
      }
      response.writeHead(200, { 'content-length': body.length }).end(body);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    url = `${base}/models/tiny.gguf`;
    const local = path.join(cacheDir, 'local.gguf');
    fs.writeFileSync(local, model);
    // Cold, warm (a second agent on the host), a local file, a fetched file that is no model.
    results = await runStarts([
      { url, sha256, cacheDir }, { url, sha256, cacheDir }, { modelPath: local }, { url: `${base}/models/broken.gguf`, cacheDir },
    ]);
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    fs.rmSync(cacheDir, { recursive: true, force: true });
  });

  const kib = `${(model.length / 1024).toFixed(1)} KiB`;

  it('cold: fetches the file into the cache, loads it, decodes one token; every phase timed, progress rising through them', () => {
    const [cold] = results;
    expect(cold.error).toBeNull();
    expect(cold.health).toBe('ENGINE_HEALTH_HEALTHY');
    expect(cold.models).toEqual(['tiny']);
    expect(cold.phases.map((phase) => [phase.name, phase.done])).toEqual([['download', true], ['load', true], ['warm_up', true]]);
    expect(cold.phases[0]).toMatchObject({ detail: `fetched ${kib}`, bytes: model.length });
    expect(cold.phases[1].detail).toBe('context of 256 tokens × 1 sequence(s), 1 thread(s)');
    expect(cold.phases[2].detail).toMatch(/^1 token decoded after a \d+-token prompt$/);
    const percents = cold.progress.map(([percent]) => percent);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    expect(cold.progress.some(([percent, stage]) => stage === 'downloading the model file' && percent <= 50)).toBe(true);
    expect(cold.progress.some(([percent, stage]) => stage === 'loading the model weights' && percent >= 50)).toBe(true);
    expect(fs.existsSync(path.join(cacheDir, 'files', `${sha256}.gguf`))).toBe(true);
  });

  it('warm: the next start on the host finds the file in the cache, fetching nothing', () => {
    expect(results[1].error).toBeNull();
    expect(results[1].phases[0]).toMatchObject({ name: 'download', done: true, detail: `cache hit (${kib})`, bytes: model.length });
    expect(gets.get('/models/tiny.gguf')).toBe(1);
  });

  it('a local model file has no download phase', () => {
    expect(results[2].error).toBeNull();
    expect(results[2].phases.map((phase) => phase.name)).toEqual(['load', 'warm_up']);
  });

  it('a fetched file that is not a model stops the start in load, the phase saying why (the agent exits with code 3)', () => {
    const [, , , broken] = results;
    expect(broken.error?.name).toBe('EngineStartError');
    expect(broken.health).toBe('ENGINE_HEALTH_UNHEALTHY');
    expect(broken.phases.map((phase) => [phase.name, phase.done])).toEqual([['download', true], ['load', false]]);
    expect(broken.phases[1].detail).toMatch(/^failed: model file .*\.gguf is not a loadable GGUF model/);
  });
});
