import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { AdapterStore } from '../../worker-agent/engines/adapter-store';
import { parseLoraRequestsInfo } from '../../worker-agent/engines/lora-requests-info';
import type { AdapterRef } from '../../proto/worker/v1/index';
import { engineJob, runEngine, sseEvents } from './support/engine-harness';
import { AdapterFileServer, peftSafetensors, ustar } from './support/adapter-files';
import { MockLoraEngine } from './support/mock-lora-engine';
import { assertAgentBuilt, spawnAgent } from './support/agent-process';
import { FakeControlPlane } from './support/fake-control-plane';

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'openai-adapters-test-'));
const disposables: Array<() => Promise<unknown>> = [];
let files: AdapterFileServer;
let peftTar: Buffer;
beforeAll(async () => {
  files = await AdapterFileServer.start();
  peftTar = ustar({ 'adapter_config.json': JSON.stringify({ peft_type: 'LORA', r: 8, lora_alpha: 16, target_modules: ['q_proj'] }), 'adapter_model.safetensors': peftSafetensors() });
});
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});
afterAll(async () => {
  await files.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

const body = { messages: [{ role: 'user', content: 'hi' }] };

async function engineFor(mock: MockLoraEngine, maxLoras = 2, maxCpuLoras = 0): Promise<OpenAiEngine> {
  const store = new AdapterStore({ directory: fs.mkdtempSync(path.join(directory, 'store-')), maxBytes: 1 << 30, fetchTimeoutMs: 5_000 });
  const engine = new OpenAiEngine({
    url: mock.url, engineModel: 'base-model', connections: 8, connectTimeoutMs: 1_000, healthIntervalMs: 60_000,
    adapters: { capacity: { maxLoras, maxCpuLoras, maxLoraRank: 64 }, store },
  });
  disposables.push(() => engine.close());
  await engine.start();
  return engine;
}

async function mockEngine(flavour: 'vllm' | 'sglang' = 'vllm'): Promise<MockLoraEngine> {
  const mock = await MockLoraEngine.start(flavour);
  disposables.push(() => mock.close());
  return mock;
}

function adapter(name: string): AdapterRef {
  return files.add(`${name}.tar`, peftTar, name, 'ADAPTER_FORMAT_PEFT_TAR');
}

describe('the openai engine hot-loads adapters into vLLM', () => {
  it('loads an adapter once for concurrent jobs, from the local directory it fetched, and sends the engine its revision name', async () => {
    const mock = await mockEngine();
    mock.loadDelayMs = 100;
    const engine = await engineFor(mock);
    const ref = adapter('support-bot');
    const runs = await Promise.all([1, 2, 3].map(() => runEngine(engine, engineJob(body, { adapter: ref }))));
    expect(runs.map((run) => run.error)).toEqual([undefined, undefined, undefined]);
    expect(mock.loadCalls).toHaveLength(1);
    expect(mock.loadCalls[0]).toMatchObject({ path: '/v1/load_lora_adapter', body: { lora_name: 'support-bot.r1' } });
    const loraPath = mock.loadCalls[0].body.lora_path!;
    expect(fs.readdirSync(loraPath).sort()).toEqual(['adapter_config.json', 'adapter_model.safetensors']);
    expect(mock.chatModels).toEqual(['support-bot.r1', 'support-bot.r1', 'support-bot.r1']);
    // The base model's jobs still go as before.
    await runEngine(engine, engineJob(body));
    expect(mock.chatModels.at(-1)).toBe('base-model');
  });

  it('answers with the client\'s adapter name in model, in a JSON body and in every SSE chunk', async () => {
    const mock = await mockEngine();
    const engine = await engineFor(mock);
    const ref = adapter('legal-drafts');
    const plain = await runEngine(engine, engineJob(body, { adapter: ref }));
    const answer = JSON.parse(plain.outputs[0].data.toString('utf8'));
    expect(answer.model).toBe('legal-drafts');
    // Only the `model` value is renamed: text naming the engine's name stays the engine's.
    expect(answer.choices[0].message.content).toBe('from legal-drafts.r1');
    const streamed = await runEngine(engine, engineJob({ ...body, stream: true, stream_options: { include_usage: true } }, { adapter: ref, stream: true, includeUsage: true }));
    const events = sseEvents(streamed.text).filter((event) => event !== '[DONE]') as Array<Record<string, any>>;
    expect(events).toHaveLength(3);
    expect(events.map((event) => event.model)).toEqual(['legal-drafts', 'legal-drafts', 'legal-drafts']);
    expect(streamed.result?.usage.completionTokens).toBe(2);
  });

  it('unloads the least recently used adapter beyond max_loras + max_cpu_loras, and reports GPU and CPU residency', async () => {
    const mock = await mockEngine();
    const engine = await engineFor(mock, 1, 1);
    for (const name of ['a1', 'a2', 'a1', 'a3']) {
      const run = await runEngine(engine, engineJob(body, { adapter: adapter(name) }));
      expect(run.error).toBeUndefined();
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(mock.unloadCalls).toEqual([{ path: '/v1/unload_lora_adapter', body: { lora_name: 'a2.r1' } }]);
    expect([...mock.loaded].sort()).toEqual(['a1.r1', 'a3.r1']);
    const states = Object.fromEntries(engine.adapters!.snapshot().map((entry) => [entry.name, entry.state]));
    expect(states).toEqual({ 'a1.r1': 'ADAPTER_STATE_CPU', 'a3.r1': 'ADAPTER_STATE_GPU' });
  });

  it('fails only the jobs of an adapter vLLM refuses, with adapter_load_failed 422 and no path, and keeps serving', async () => {
    const mock = await mockEngine();
    const engine = await engineFor(mock);
    const bad = adapter('too-big');
    mock.refuse.add(bad.name);
    const refused = await runEngine(engine, engineJob(body, { adapter: bad }));
    expect(refused.error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
    expect((refused.error as Error).message).toBe('adapter too-big: the engine refused to load it (HTTP 400): wrong base model, a rank above its max_lora_rank, or malformed weights');
    expect(engine.adapters!.snapshot()).toEqual([expect.objectContaining({ name: 'too-big.r1', state: 'ADAPTER_STATE_FAILED', error: (refused.error as Error).message })]);
    expect(mock.chatModels).toEqual([]);
    expect((await runEngine(engine, engineJob(body, { adapter: adapter('fine') }))).error).toBeUndefined();
    expect((await runEngine(engine, engineJob(body))).error).toBeUndefined();
    // The next job of the refused adapter tries again (once: one load in flight).
    mock.refuse.clear();
    expect((await runEngine(engine, engineJob(body, { adapter: bad }))).error).toBeUndefined();
    expect(mock.loadCalls.filter((call) => call.body.lora_name === 'too-big.r1')).toHaveLength(2);
  });

  it('says so when the engine has no runtime LoRA loading (started without --enable-lora)', async () => {
    const mock = await mockEngine();
    mock.runtimeLora = false;
    const engine = await engineFor(mock);
    const run = await runEngine(engine, engineJob(body, { adapter: adapter('nolora') }));
    expect(run.error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422, message: expect.stringContaining('does not load adapters at runtime') });
  });

  it('fails with 502 when the weights cannot be fetched, without the presigned URL', async () => {
    const mock = await mockEngine();
    const engine = await engineFor(mock);
    const missing = { ...adapter('gone'), source: `${files.url}/nothing-here.tar?X-Amz-Signature=secret` };
    const run = await runEngine(engine, engineJob(body, { adapter: missing }));
    expect(run.error).toMatchObject({ code: 'adapter_load_failed', engineStatus: 502, message: 'adapter gone: fetching its weights answered HTTP 404' });
    expect(mock.loadCalls).toEqual([]);
  });

  it('reloads an adapter the engine lost (it restarted) and resends the job once', async () => {
    const mock = await mockEngine();
    const engine = await engineFor(mock);
    const ref = adapter('survivor');
    await runEngine(engine, engineJob(body, { adapter: ref }));
    mock.loaded.clear();
    const run = await runEngine(engine, engineJob(body, { adapter: ref }));
    expect(run.error).toBeUndefined();
    expect(mock.loadCalls).toHaveLength(2);
    expect(mock.chatModels).toEqual(['survivor.r1', 'survivor.r1', 'survivor.r1']);
  });

  it('passes a Hugging Face adapter\'s repo id to the engine to fetch, and takes "already loaded" (a restarted agent) as loaded', async () => {
    const mock = await mockEngine();
    mock.loaded.add('hf.r1');
    const engine = await engineFor(mock);
    const ref: AdapterRef = { name: 'hf.r1', displayName: 'hf', format: 'ADAPTER_FORMAT_HUGGING_FACE', source: 'org/sql-lora', sha256: '', sizeBytes: 0, rank: 16, scale: 0 };
    expect((await runEngine(engine, engineJob(body, { adapter: ref }))).error).toBeUndefined();
    expect(mock.loadCalls).toEqual([{ path: '/v1/load_lora_adapter', body: { lora_name: 'hf.r1', lora_path: 'org/sql-lora' } }]);
  });

  it('speaks SGLang\'s endpoints to an engine whose models are owned by sglang', async () => {
    const mock = await mockEngine('sglang');
    const engine = await engineFor(mock, 1);
    await runEngine(engine, engineJob(body, { adapter: adapter('s1') }));
    await runEngine(engine, engineJob(body, { adapter: adapter('s2') }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(mock.loadCalls.map((call) => [call.path, call.body.lora_name])).toEqual([['/load_lora_adapter', 's1.r1'], ['/load_lora_adapter', 's2.r1']]);
    expect(mock.unloadCalls).toEqual([{ path: '/unload_lora_adapter', body: { lora_name: 's1.r1' } }]);
  });

  it('reads vllm:lora_requests_info\'s newest series: what runs is the last to be unloaded', async () => {
    expect(parseLoraRequestsInfo('vllm:lora_requests_info{max_lora="4",running_lora_adapters="a.r1,b.r2",waiting_lora_adapters="c.r1"} 2.0e+09\n'
      + 'vllm:lora_requests_info{max_lora="4",running_lora_adapters="old.r1",waiting_lora_adapters=""} 1.0e+09\n'))
      .toEqual({ running: ['a.r1', 'b.r2'], waiting: ['c.r1'], maxLora: 4 });
    expect(parseLoraRequestsInfo('vllm:num_requests_running 1\n')).toBeNull();
    const mock = await mockEngine();
    const engine = await engineFor(mock, 2);
    await runEngine(engine, engineJob(body, { adapter: adapter('m1') }));
    await runEngine(engine, engineJob(body, { adapter: adapter('m2') }));
    // vLLM says m1 runs (a request the agent sent earlier still decodes): m2 is the one to go.
    mock.running = ['m1.r1'];
    await engine.signals();
    await runEngine(engine, engineJob(body, { adapter: adapter('m3') }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(mock.unloadCalls.map((call) => call.body.lora_name)).toEqual(['m2.r1']);
  });
});

describe('the agent process with a vLLM serving adapters', () => {
  beforeAll(() => assertAgentBuilt());

  it('says its LoRA capacity in Hello and sends residency on heartbeats, early when an adapter\'s state changes', async () => {
    const mock = await mockEngine();
    mock.loadDelayMs = 300;
    const plane = await FakeControlPlane.start();
    disposables.push(() => plane.close());
    spawnAgent({
      WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_LOG_LEVEL: 'warn', WORKER_ENGINE: 'openai', WORKER_ENGINE_URL: mock.url,
      WORKER_ENGINE_MODEL: 'base-model', WORKER_MAX_LORAS: '3', WORKER_MAX_CPU_LORAS: '5', WORKER_MAX_LORA_RANK: '32',
      WORKER_ADAPTER_DIR: fs.mkdtempSync(path.join(directory, 'agent-')),
    }, disposables);
    const stream = await plane.stream(0, 15_000);
    await stream.ready(15_000);
    expect(stream.hello).toMatchObject({ maxLoras: 3, maxCpuLoras: 5, maxLoraRank: 32 });
    expect(stream.heartbeats.at(-1)!.adapters).toEqual([]);
    const ref = adapter('hb');
    const good = { ...ref, sizeBytes: ref.sizeBytes };
    const bad = adapter('hb-bad');
    mock.refuse.add(bad.name);
    const assign = (jobId: string, adapterRef: AdapterRef) => ({
      assign: { jobId, kind: 'JOB_KIND_CHAT_COMPLETION' as const, deadlineUnixMs: Date.now() + 30_000, includeUsage: false, model: 'base-model', stream: false, body: Buffer.from(JSON.stringify(body)), adapter: adapterRef },
    });
    stream.send(assign('job_good', good));
    // The 200 ms heartbeat interval would show it too; what matters is that it shows while loading.
    await stream.until(() => stream.heartbeats.some((heartbeat) => heartbeat.adapters?.some((entry) => entry.name === 'hb.r1' && entry.state === 'ADAPTER_STATE_LOADING')), 5_000);
    expect((await stream.terminal('job_good', 10_000)).completed).toBeDefined();
    const output = stream.eventsOf('job_good').find((event) => event.output)!.output!;
    expect(JSON.parse(output.data.toString('utf8')).model).toBe('hb');
    stream.send(assign('job_bad', bad));
    const failed = await stream.terminal('job_bad', 10_000);
    expect(failed.failed).toMatchObject({ code: 'adapter_load_failed', engineStatus: 422 });
    expect(failed.failed!.message).not.toContain(directory);
    const latest = await stream.until(() => {
      const adapters = stream.heartbeats.at(-1)?.adapters ?? [];
      return adapters.some((entry) => entry.state === 'ADAPTER_STATE_FAILED') && adapters.some((entry) => entry.state === 'ADAPTER_STATE_GPU') ? adapters : undefined;
    }, 5_000);
    expect(latest).toEqual(expect.arrayContaining([
      expect.objectContaining({ name: 'hb.r1', state: 'ADAPTER_STATE_GPU', error: '', lastUsedUnixMs: expect.any(Number) }),
      expect.objectContaining({ name: 'hb-bad.r1', state: 'ADAPTER_STATE_FAILED', error: failed.failed!.message }),
    ]));
    expect(latest.find((entry) => entry.name === 'hb.r1')!.loadMs).toBeGreaterThanOrEqual(250);
  });
});
