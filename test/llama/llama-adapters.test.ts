/**
 * LoRA adapters on real llama.cpp (threads: 1) with the tiny GGUF model and adapters generated
 * at test time (tiny-lora-gguf.ts), served by the compiled agent over real gRPC and fetched from
 * an in-test HTTP server as from storage: greedy answers change with the adapter, eviction
 * disposes the adapter's context and frees its weights, a malformed adapter fails only its jobs
 * while the agent keeps serving, and concurrent jobs of three adapters all complete.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AdapterRef } from '../../proto/worker/v1/index';
import { assertAgentBuilt, spawnAgent, type AgentProcess } from '../worker-agent/support/agent-process';
import { FakeControlPlane, type FakeAgentStream } from '../worker-agent/support/fake-control-plane';
import { AdapterFileServer } from '../worker-agent/support/adapter-files';
import { writeTinyGguf } from '../../worker-agent/llama/tiny-gguf';
import { tinyLoraGguf } from '../../worker-agent/llama/tiny-lora-gguf';

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'llama-adapters-test-'));
const modelPath = writeTinyGguf(path.join(directory, 'tiny.gguf'), { contextLength: 1024 });
const disposables: Array<() => Promise<unknown>> = [];
let files: AdapterFileServer;

beforeAll(async () => {
  assertAgentBuilt();
  files = await AdapterFileServer.start();
});
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});
afterAll(async () => {
  await files.close();
  fs.rmSync(directory, { recursive: true, force: true });
});

async function connectedAgent(maxLoras: number): Promise<{ stream: FakeAgentStream; agent: AgentProcess }> {
  // Generous waits: other suites share the machine, and a loaded 2-core box starts llama.cpp slowly.
  const plane = await FakeControlPlane.start();
  disposables.push(() => plane.close());
  const agent = spawnAgent({
    WORKER_LOG_LEVEL: 'warn', WORKER_JOIN_TOKEN: 'jt', WORKER_ENGINE: 'llama-cpp', WORKER_CONTROL_PLANE: plane.address,
    WORKER_LLAMA_MODEL_PATH: modelPath, WORKER_LLAMA_THREADS: '1', WORKER_LLAMA_CONTEXT_SIZE: '256', WORKER_LLAMA_PARALLEL: '2',
    WORKER_MAX_LORAS: String(maxLoras), WORKER_ADAPTER_DIR: fs.mkdtempSync(path.join(directory, 'adapters-')),
  }, disposables);
  const stream = await plane.stream(0, 30_000);
  await stream.ready(30_000);
  return { stream, agent };
}

let jobs = 0;
/** Sends a greedy chat job (with the adapter, if any) and returns its job id. */
function ask(stream: FakeAgentStream, adapter?: AdapterRef): string {
  const jobId = `job_${++jobs}`;
  const body = { messages: [{ role: 'user', content: 'Tell me a story' }], max_tokens: 16, temperature: 0 };
  stream.send({
    assign: {
      jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 60_000, includeUsage: false, model: 'local/tiny',
      stream: false, body: Buffer.from(JSON.stringify(body)), ...(adapter ? { adapter } : {}),
    },
  });
  return jobId;
}

async function answer(stream: FakeAgentStream, jobId: string): Promise<{ model: string; text: string }> {
  const terminal = await stream.terminal(jobId, 60_000);
  if (!terminal.completed) throw new Error(`${jobId} failed: ${terminal.failed?.code} ${terminal.failed?.message}`);
  const body = JSON.parse(stream.eventsOf(jobId).find((event) => event.output)!.output!.data.toString('utf8'));
  return { model: body.model, text: body.choices[0].message.content };
}

const lora = (name: string, seed: number, options: Parameters<typeof tinyLoraGguf>[0] = {}) => files.add(`${name}.gguf`, tinyLoraGguf({ seed, ...options }), name);

describe('llama.cpp LoRA adapters through the agent', () => {
  it('changes greedy output with an adapter, gives two adapters two outputs, and answers under the client\'s name', async () => {
    const { stream } = await connectedAgent(2);
    expect(stream.hello).toMatchObject({ maxLoras: 2, maxCpuLoras: 0, maxLoraRank: 64 });
    const first = lora('first', 101);
    const second = lora('second', 202);
    const base = await answer(stream, ask(stream));
    const withFirst = await answer(stream, ask(stream, first));
    const withSecond = await answer(stream, ask(stream, second));
    expect(base.model).toBe('local/tiny');
    expect(withFirst.model).toBe('first');
    expect(withSecond.model).toBe('second');
    for (const reply of [base, withFirst, withSecond]) expect(reply.text).toHaveLength(16);
    expect(withFirst.text).not.toBe(base.text);
    expect(withSecond.text).not.toBe(base.text);
    expect(withSecond.text).not.toBe(withFirst.text);
    // Greedy: the same adapter answers the same again, and the base context was left untouched.
    expect((await answer(stream, ask(stream, first))).text).toBe(withFirst.text);
    expect((await answer(stream, ask(stream))).text).toBe(base.text);
    // The load's end reaches the control plane on the next heartbeat (an early one at most 250 ms after the previous).
    await stream.until(() => {
      const residency = stream.heartbeats.at(-1)?.adapters ?? [];
      return JSON.stringify(residency.map((entry) => [entry.name, entry.state]).sort()) === JSON.stringify([['first.r1', 'ADAPTER_STATE_GPU'], ['second.r1', 'ADAPTER_STATE_GPU']]);
    }, 15_000);
  });

  it('fails only the jobs of a malformed adapter with adapter_load_failed, and keeps serving', async () => {
    const { stream, agent } = await connectedAgent(2);
    const malformed = [
      lora('integer-alpha', 303, { malformed: 'integer-alpha' }),
      lora('wrong-shape', 304, { malformed: 'wrong-shape' }),
      lora('other-arch', 305, { architecture: 'qwen2' }),
      lora('wider', 306, { embeddingLength: 128 }),
      lora('too-big-rank', 307, { rank: 128 }),
      files.add('not-gguf.gguf', Buffer.from('definitely not a GGUF file'), 'not-gguf'),
    ];
    const failures = [];
    for (const adapter of malformed) failures.push((await stream.terminal(ask(stream, adapter), 60_000)).failed);
    expect(failures.map((failure) => [failure?.code, failure?.engineStatus])).toEqual(Array(malformed.length).fill(['adapter_load_failed', 422]));
    expect(failures[0]!.message).toBe('adapter integer-alpha does not fit this model: adapter.lora.alpha must be a FLOAT32');
    expect(failures[2]!.message).toBe('adapter other-arch does not fit this model: it is for architecture qwen2, the base model is llama');
    expect(failures[4]!.message).toBe('adapter too-big-rank does not fit this model: its rank 128 is above this replica\'s max_lora_rank 64');
    for (const failure of failures) expect(failure!.message).not.toContain(directory);
    // The agent is alive and serves the base model and a good adapter.
    expect(agent.child.exitCode).toBeNull();
    expect((await answer(stream, ask(stream))).model).toBe('local/tiny');
    expect((await answer(stream, ask(stream, lora('good', 308)))).model).toBe('good');
    const failed = await stream.until(() => {
      const adapters = stream.heartbeats.at(-1)?.adapters ?? [];
      return adapters.filter((entry) => entry.state === 'ADAPTER_STATE_FAILED').length === malformed.length ? adapters : undefined;
    }, 15_000);
    expect(failed.find((entry) => entry.name === 'integer-alpha.r1')!.error).toBe(failures[0]!.message);
  });

  it('completes concurrent jobs of 3 adapters on one replica holding 2, evicting the least recently used after', async () => {
    const { stream } = await connectedAgent(2);
    const adapters = [lora('c1', 401), lora('c2', 402), lora('c3', 403)];
    // Each answered alone first, to compare with.
    const alone: string[] = [];
    for (const adapter of adapters) alone.push((await answer(stream, ask(stream, adapter))).text);
    const ids = adapters.flatMap((adapter) => [ask(stream, adapter), ask(stream, adapter)]);
    const replies = await Promise.all(ids.map((id) => answer(stream, id)));
    expect(replies.map((reply) => reply.model)).toEqual(['c1', 'c1', 'c2', 'c2', 'c3', 'c3']);
    expect(replies.map((reply) => reply.text)).toEqual([alone[0], alone[0], alone[1], alone[1], alone[2], alone[2]]);
    const settled = await stream.until(() => {
      const held = stream.heartbeats.at(-1)?.adapters ?? [];
      return held.length === 2 ? held : undefined;
    }, 15_000);
    expect(settled.every((entry) => entry.state === 'ADAPTER_STATE_GPU')).toBe(true);
  });
});

/**
 * The engine itself, in a plain Node process (node-llama-cpp is ESM: jest cannot import it), to
 * see what an eviction frees: the evicted adapter's context is disposed, the live contexts stay
 * at max_loras, and llama.cpp no longer holds the adapter's weights.
 */
const EVICTION_SCRIPT = `
const dist = process.argv[1];
const { LlamaCppEngine } = require(dist + '/worker-agent/llama/llama-cpp-engine.js');
const { loadedLoraCount } = require(dist + '/worker-agent/llama/llama-runtime.js');
const { AdapterStore } = require(dist + '/worker-agent/engines/adapter-store.js');
const { JobCancellation } = require(dist + '/worker-agent/job-cancellation.js');
const { silentLogger } = require(dist + '/worker-agent/agent-logger.js');
const [modelPath, adapterDir, refsJson] = process.argv.slice(2);
(async () => {
  const store = new AdapterStore({ directory: adapterDir, maxBytes: 1 << 30, fetchTimeoutMs: 10000 });
  const engine = new LlamaCppEngine({ modelPath, threads: 1, contextSize: 256, parallel: 1, adapters: { capacity: { maxLoras: 2, maxCpuLoras: 0, maxLoraRank: 64 }, store } }, silentLogger);
  await engine.start();
  const held = [];
  const run = async (adapter) => {
    let body;
    const sink = { chunk() {}, output(data) { body = JSON.parse(data.toString()); } };
    const job = { jobId: 'j', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, temperature: 0 })), stream: false, includeUsage: false, model: 'local/tiny', adapter };
    await engine.run(job, sink, new JobCancellation());
    await new Promise((resolve) => setTimeout(resolve, 50));
    return body.model;
  };
  const states = [];
  for (const ref of JSON.parse(refsJson)) {
    await run(ref);
    for (const entry of engine.loras.slots.snapshot()) held.push(entry.name);
    states.push({ after: ref.name, live: engine.loras.liveContexts, loras: loadedLoraCount(engine.runtime.model), held: engine.loras.slots.snapshot().map((entry) => entry.name).sort() });
  }
  await engine.close();
  process.stdout.write(JSON.stringify({ states, livesAfterClose: engine.loras.liveContexts }));
})().catch((error) => { process.stderr.write(String(error && error.stack || error)); process.exit(1); });
`;

describe('llama.cpp adapter eviction', () => {
  it('disposes the evicted adapter\'s context and frees its weights, keeping max_loras contexts alive', async () => {
    const refs = [lora('e1', 501), lora('e2', 502), lora('e3', 503), lora('e1-again', 501, { seed: 504 })];
    const child = spawn(process.execPath, ['-e', EVICTION_SCRIPT, path.resolve(__dirname, '../../dist'), modelPath, fs.mkdtempSync(path.join(directory, 'evict-')), JSON.stringify(refs)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (data: Buffer) => { stdout += data; });
    child.stderr.on('data', (data: Buffer) => { stderr += data; });
    // The signal too: a CI run once saw this child end with no exit code and nothing on stderr.
    const exit = await new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
    expect({ exit, stderr }).toEqual({ exit: { code: 0, signal: null }, stderr: '' });
    const { states, livesAfterClose } = JSON.parse(stdout);
    expect(states).toEqual([
      { after: 'e1.r1', live: 1, loras: 1, held: ['e1.r1'] },
      { after: 'e2.r1', live: 2, loras: 2, held: ['e1.r1', 'e2.r1'] },
      // e1 was the least recently used: its context is gone, and so are its weights.
      { after: 'e3.r1', live: 2, loras: 2, held: ['e2.r1', 'e3.r1'] },
      { after: 'e1-again.r1', live: 2, loras: 2, held: ['e1-again.r1', 'e3.r1'] },
    ]);
    expect(livesAfterClose).toBe(0);
  });
});
