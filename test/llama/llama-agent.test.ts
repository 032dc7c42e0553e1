/**
 * The compiled agent with `--engine llama-cpp` on a tiny GGUF model written at test time,
 * against an in-test control plane over real gRPC: Hello, real generation, cancellation, and
 * clear failures for model files that do not load.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { assertAgentBuilt, spawnAgent, type AgentProcess } from '../worker-agent/support/agent-process';
import { FakeControlPlane, type FakeAgentStream } from '../worker-agent/support/fake-control-plane';
import { tinyGguf, writeTinyGguf } from '../../worker-agent/llama/tiny-gguf';
import { withU32 } from './support/tiny-model';

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'llama-agent-test-'));
const modelPath = writeTinyGguf(path.join(directory, 'tiny.gguf'), { contextLength: 4096 });
const disposables: Array<() => Promise<unknown>> = [];

afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

afterAll(() => fs.rmSync(directory, { recursive: true, force: true }));

beforeAll(() => {
  assertAgentBuilt();
});

function spawnLlamaAgent(env: Record<string, string>): AgentProcess {
  return spawnAgent({
    WORKER_LOG_LEVEL: 'warn', WORKER_JOIN_TOKEN: 'jt', WORKER_ENGINE: 'llama-cpp',
    WORKER_LLAMA_THREADS: '1', WORKER_LLAMA_CONTEXT_SIZE: '2048', WORKER_LLAMA_PARALLEL: '2', ...env,
  }, disposables);
}

async function connectedAgent(): Promise<FakeAgentStream> {
  const plane = await FakeControlPlane.start();
  disposables.push(() => plane.close());
  spawnLlamaAgent({ WORKER_CONTROL_PLANE: plane.address, WORKER_LLAMA_MODEL_PATH: modelPath });
  const stream = await plane.stream(0, 15_000);
  await stream.ready(15_000);
  return stream;
}

function assign(jobId: string, body: Record<string, unknown>, kind: 'JOB_KIND_CHAT_COMPLETION' | 'JOB_KIND_COMPLETION' = 'JOB_KIND_CHAT_COMPLETION') {
  return {
    assign: {
      jobId, kind, deadlineUnixMs: Date.now() + 30_000, includeUsage: false, model: 'local/tiny',
      stream: body.stream === true, body: Buffer.from(JSON.stringify(body)),
    },
  };
}

describe('worker agent with the llama-cpp engine', () => {
  it('says Hello as llama-cpp with its version and no GPUs, and generates real tokens', async () => {
    const stream = await connectedAgent();
    expect(stream.hello).toMatchObject({ engine: { kind: 'llama-cpp', version: expect.stringMatching(/^node-llama-cpp 3\.22\.1 \(llama\.cpp \S+\)$/) }, gpus: [] });
    // The agent joins before the model is loaded: until then it says so, with how far it is.
    const beforeReady = stream.heartbeats.slice(0, stream.heartbeats.findIndex((heartbeat) => heartbeat.engineHealth === 'ENGINE_HEALTH_HEALTHY'));
    for (const heartbeat of beforeReady) {
      expect(heartbeat.engineHealth).toBe('ENGINE_HEALTH_STARTING');
      expect(heartbeat.loadPercent).toBeLessThan(100);
      expect(heartbeat.detail).toMatch(/^(starting the engine|loading the model weights|creating the context|warming up): \d+ %$/);
    }
    stream.send(assign('job_plain', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 12, temperature: 0 }));
    const terminal = await stream.terminal('job_plain', 10_000);
    const output = stream.eventsOf('job_plain').find((event) => event.output)!.output!;
    const body = JSON.parse(output.data.toString('utf8'));
    expect(body).toMatchObject({ object: 'chat.completion', model: 'local/tiny', choices: [{ index: 0, finish_reason: 'length', message: { role: 'assistant' } }] });
    expect(body.choices[0].message.content).toHaveLength(12);
    // BOS + "<|im_start|>" + "user\nHi" + "<|im_end|>" + "\n" + "<|im_start|>" + "assistant\n": bytes plus four control tokens.
    expect(body.usage).toEqual({ prompt_tokens: 1 + 1 + 7 + 1 + 1 + 1 + 10, completion_tokens: 12, total_tokens: 34, prompt_tokens_details: { cached_tokens: 0 } });
    // The wire's Usage carries the engine's cached prompt tokens (none on a first request).
    expect(terminal.completed?.usage).toEqual({ promptTokens: 22, completionTokens: 12, totalTokens: 34, cachedTokens: 0 });
  });

  it('stops generating at once when the job is canceled, and reports the tokens it made', async () => {
    const stream = await connectedAgent();
    const assignedAt = Date.now();
    stream.send(assign('job_long', { messages: [{ role: 'user', content: 'go on' }], max_tokens: 2000, stream: true }));
    await stream.until(() => stream.chunkText('job_long').split('"content"').length > 5);
    const canceledAt = Date.now();
    stream.send({ cancel: { jobId: 'job_long', reason: 'client went away' } });
    const canceled = await stream.terminal('job_long');
    expect(canceled.failed?.code).toBe('canceled');
    const generated = canceled.failed!.usage!.completionTokens;
    expect(generated).toBeGreaterThan(3);
    expect(generated).toBeLessThan(2000);
    // Both sequences are free again at once: a request needing both is answered long before the
    // canceled one could have run out its tokens at the pace it had (on this machine, loaded or not).
    const startedAt = Date.now();
    stream.send(assign('job_both', { messages: [{ role: 'user', content: 'two' }], max_tokens: 4, n: 2 }));
    expect((await stream.terminal('job_both', 30_000)).completed?.usage?.completionTokens).toBe(8);
    const msPerToken = (canceledAt - assignedAt) / generated;
    expect(Date.now() - startedAt).toBeLessThan(((2000 - generated) * msPerToken) / 2);
  });

  it('stops at its stream window until Credit comes (the client reads slowly), then goes on', async () => {
    const stream = await connectedAgent();
    const window = 16 * 1024;
    const job = assign('job_windowed', { messages: [{ role: 'user', content: 'go on' }], max_tokens: 2000, n: 2, stream: true });
    stream.send({ assign: { ...job.assign, streamWindowBytes: window } });
    const sent = () => Buffer.byteLength(stream.chunkText('job_windowed'));
    await stream.until(() => sent() >= window, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const held = sent();
    // Each choice may be one token past the window when it stops.
    expect(held).toBeLessThan(window + 4 * 1024);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(sent()).toBe(held);
    stream.send({ credit: { jobId: 'job_windowed', bytes: held } });
    await stream.until(() => sent() >= held + window, 10_000);
    stream.send({ cancel: { jobId: 'job_windowed', reason: 'client_stalled' } });
    expect((await stream.terminal('job_windowed')).failed?.code).toBe('canceled');
  });

  it('exits with code 3 and one clear line when the model file is missing', async () => {
    const agent = spawnLlamaAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_LLAMA_MODEL_PATH: path.join(directory, 'missing.gguf') });
    expect(await agent.exited).toEqual({ code: 3, signal: null });
    expect(agent.lastLine()).toBe(`worker agent: engine llama-cpp failed to start: model file ${path.join(directory, 'missing.gguf')} cannot be read: no such file`);
  });

  it('exits with code 3 when the file is not a GGUF model or is cut short', async () => {
    const notGguf = path.join(directory, 'not-a-model.gguf');
    fs.writeFileSync(notGguf, 'this is not a model\n'.repeat(100));
    const truncated = path.join(directory, 'truncated.gguf');
    const bytes = tinyGguf();
    fs.writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
    for (const file of [notGguf, truncated]) {
      const agent = spawnLlamaAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_LLAMA_MODEL_PATH: file });
      expect(await agent.exited).toEqual({ code: 3, signal: null });
      expect(agent.lastLine()).toMatch(new RegExp(`^worker agent: engine llama-cpp failed to start: model file ${file} is not a loadable GGUF model: .+`));
    }
  });

  it('dies by SIGABRT with llama.cpp\'s assertion as its last line when a malformed file aborts it', async () => {
    const aborting = path.join(directory, 'aborting.gguf');
    fs.writeFileSync(aborting, withU32(tinyGguf(), 'llama.attention.head_count', 0));
    const agent = spawnLlamaAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_LLAMA_MODEL_PATH: aborting });
    expect(await agent.exited).toEqual({ code: null, signal: 'SIGABRT' });
    expect(agent.lastLine()).toMatch(/GGML_ASSERT\(.+\) failed$/);
  });

  it('refuses --engine llama-cpp without a model path or URL (exit 2)', async () => {
    const agent = spawnLlamaAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1' });
    expect((await agent.exited).code).toBe(2);
    expect(agent.stderr()).toContain('--model-path / WORKER_LLAMA_MODEL_PATH or --model-url / WORKER_LLAMA_MODEL_URL is required with --engine llama-cpp');
  });
});
