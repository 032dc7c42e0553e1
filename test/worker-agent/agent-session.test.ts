import { PROTOCOL_VERSION, type Assign } from '../../proto/worker/v1/index';
import { AgentSession, type AgentSessionOptions } from '../../worker-agent/agent-session';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS, type CpuEngineOptions } from '../../worker-agent/engines/cpu-engine-options';
import type { Engine } from '../../worker-agent/engines/engine';
import { countTokens } from '../../worker-agent/engines/cpu-tokenizer';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { startCpuEngineServer } from '../../worker-agent/engines/cpu-engine-server';
import { FakeControlPlane, welcomeFrame, type HelloAnswer } from './support/fake-control-plane';
import { sseEvents, streamedText } from './support/engine-harness';

const disposables: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

async function setup(
  options: Partial<AgentSessionOptions> = {}, engineOptions: Partial<CpuEngineOptions> = {}, answerHello?: HelloAnswer,
  engine: Engine = new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, testControls: true, ...engineOptions }),
): Promise<{ plane: FakeControlPlane; session: AgentSession; engine: Engine }> {
  const plane = await FakeControlPlane.start({ answerHello });
  disposables.push(() => plane.close());
  const session = new AgentSession({
    options: {
      controlPlaneAddress: plane.address, joinToken: 'jt_secret', agentId: 'agt_test', maxConcurrency: 4,
      reconnectInitialMs: 5, reconnectMaxMs: 20, drainTimeoutMs: 2_000, gpus: [], ...options,
    },
    engine, agentVersion: '9.9.9',
  });
  disposables.push(() => session.stop('test over'));
  session.start();
  return { plane, session, engine };
}

let jobCounter = 0;
function assign(body: Record<string, unknown>, overrides: Partial<Assign> = {}): { assign: Assign } {
  jobCounter += 1;
  return {
    assign: {
      jobId: `job_${jobCounter}`, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 10_000,
      body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi there' }], ...body })),
      stream: body.stream === true, includeUsage: false, model: 'catalog/model', ...overrides,
    },
  };
}

/** A streamed job at 20 tokens/s that has sent its first chunk: long enough to interrupt. */
async function slowJobInFlight(options: Partial<AgentSessionOptions> = {}) {
  const context = await setup(options, { tokensPerSecond: 20 });
  const stream = await context.plane.stream(0);
  const { assign: slow } = assign({ stream: true, max_tokens: 500 });
  stream.send({ assign: slow });
  await stream.until(() => stream.eventsOf(slow.jobId).find((event) => event.chunk));
  return { ...context, stream, jobId: slow.jobId };
}

describe('AgentSession', () => {
  test('says Hello, then heartbeats after Welcome', async () => {
    const { plane, session } = await setup({ gpus: [{ name: 'H100', memoryBytes: 80 * 1024 ** 3, index: 0 }] });
    const stream = await plane.stream(0);
    expect(stream.hello).toEqual({
      protocolVersion: PROTOCOL_VERSION, agentVersion: '9.9.9', joinToken: 'jt_secret',
      gpus: [{ name: 'H100', memoryBytes: 80 * 1024 ** 3, index: 0 }],
      engine: { kind: 'cpu', version: expect.any(String), url: '' }, models: [], maxConcurrency: 4, agentId: 'agt_test',
      priorityCapable: true, flowControl: true, preemptsBatchLines: true,
      // An engine without adapters leaves the LoRA capacity unset: the control plane reads 0 (no adapter jobs).
      maxLoras: 0, maxCpuLoras: 0, maxLoraRank: 0,
      // No weights cache given to the session: nothing cached said.
      cachedModels: [],
    });
    const heartbeat = await stream.until(() => stream.frames.find((frame) => frame.heartbeat)?.heartbeat);
    expect(heartbeat).toMatchObject({ inFlight: 0, queued: 0, engineHealth: 'ENGINE_HEALTH_HEALTHY', detail: '' });
    expect(session.welcome?.replicaId).toBe('rep_test');
  });

  test('runs a streamed job: chunks, then completed with usage (no accepted frame when it starts at once)', async () => {
    const { plane } = await setup();
    const stream = await plane.stream(0);
    const frame = assign({ stream: true, max_tokens: 8 });
    stream.send(frame);
    const terminal = await stream.terminal(frame.assign.jobId);
    const events = stream.eventsOf(frame.assign.jobId);
    expect(events.some((event) => event.accepted)).toBe(false);
    expect(events[0].chunk).toBeDefined();
    // On the wire, an engine that reports no prefix cache has 0 cached tokens (proto3's default).
    expect(terminal.completed).toEqual({ usage: { promptTokens: 2, completionTokens: 8, totalTokens: 10, cachedTokens: 0 }, finishReason: 'length' });
    expect(events.filter((event) => event.completed || event.failed)).toHaveLength(1);
    const text = stream.chunkText(frame.assign.jobId);
    expect(text).not.toContain('[DONE]');
    expect(countTokens(streamedText(sseEvents(text)))).toBe(8);
  });

  describe.each([
    ['the in-process CPU engine', async () => new CpuEngine()],
    ['an OpenAI-compatible HTTP engine', async () => {
      const server = await startCpuEngineServer();
      disposables.push(() => server.close());
      const engine = new OpenAiEngine({ url: server.url, connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000 });
      disposables.push(() => engine.close());
      await engine.start();
      return engine;
    }],
  ])('a streamed job with a window, on %s', (_name, makeEngine) => {
    const WINDOW = 64 * 1024;
    const settle = () => new Promise((resolve) => setTimeout(resolve, 300));

    test('stops once a window of chunk bytes is uncredited, goes on with Credit, and a Cancel ends it with its usage', async () => {
      const { plane } = await setup({}, {}, undefined, await makeEngine());
      const stream = await plane.stream(0);
      await stream.ready();
      const frame = assign({ stream: true, n: 16, max_tokens: 65_536 }, { streamWindowBytes: WINDOW });
      const { jobId } = frame.assign;
      const sent = () => Buffer.byteLength(stream.chunkText(jobId));
      stream.send(frame);
      await stream.until(() => sent() >= WINDOW);
      await settle();
      const held = sent();
      // One engine read past the window at most (an HTTP engine's reads are up to 64 KiB).
      expect(held).toBeLessThan(WINDOW + 96 * 1024);
      await settle();
      expect(sent()).toBe(held);

      stream.send({ credit: { jobId, bytes: held } });
      await stream.until(() => sent() >= held + WINDOW);
      stream.send({ cancel: { jobId, reason: 'client_stalled' } });
      const terminal = await stream.terminal(jobId);
      expect(terminal.failed).toMatchObject({ code: 'canceled' });
      expect(terminal.failed!.usage!.completionTokens).toBeGreaterThan(0);
    });
  });

  test('runs a non-streamed job: one output with the engine body', async () => {
    const { plane } = await setup();
    const stream = await plane.stream(0);
    const frame = assign({ max_tokens: 3 });
    stream.send(frame);
    await stream.terminal(frame.assign.jobId);
    const output = stream.eventsOf(frame.assign.jobId).find((event) => event.output)!.output!;
    expect(output.contentType).toBe('application/json');
    expect(JSON.parse(output.data.toString())).toMatchObject({ object: 'chat.completion', model: 'catalog/model' });
  });

  test('runs jobs through an OpenAI-compatible HTTP engine the same way', async () => {
    const server = await startCpuEngineServer();
    disposables.push(() => server.close());
    const engine = new OpenAiEngine({ url: server.url, connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000 });
    disposables.push(() => engine.close());
    await engine.start();
    const { plane } = await setup({}, {}, undefined, engine);
    const stream = await plane.stream(0);
    expect(stream.hello?.engine).toEqual({ kind: 'openai', version: '', url: server.url });
    expect(stream.hello?.models).toEqual(['cpu']);
    const frame = assign({ stream: true, max_tokens: 6 }, { includeUsage: true });
    stream.send(frame);
    const terminal = await stream.terminal(frame.assign.jobId);
    expect(terminal.completed?.usage).toEqual({ promptTokens: 2, completionTokens: 6, totalTokens: 8, cachedTokens: 0 });
    const events = sseEvents(stream.chunkText(frame.assign.jobId));
    expect(events.at(-1)).toMatchObject({ choices: [], usage: { completion_tokens: 6 } });
  });

  test('queues jobs beyond maxConcurrency in FIFO order', async () => {
    const { plane } = await setup({ maxConcurrency: 1 }, { ttftMs: 300 });
    const stream = await plane.stream(0);
    const first = assign({});
    const second = assign({});
    stream.send(first);
    stream.send(second);
    await stream.until(() => stream.eventsOf(second.assign.jobId)[0]);
    expect(stream.eventsOf(first.assign.jobId).some((event) => event.accepted)).toBe(false);
    expect(stream.eventsOf(second.assign.jobId)[0].accepted).toEqual({ queued: true });
    const heartbeat = await stream.until(() => stream.frames.find((candidate) => candidate.heartbeat?.queued === 1)?.heartbeat);
    expect(heartbeat.inFlight).toBe(1);
    await stream.terminal(second.assign.jobId);
    const order = stream.events.filter((event) => event.completed).map((event) => event.jobId);
    expect(order).toEqual([first.assign.jobId, second.assign.jobId]);
  });

  test('Cancel aborts the job and answers failed(canceled); unknown ids are ignored', async () => {
    const { stream, jobId } = await slowJobInFlight();
    stream.send({ cancel: { jobId: 'job_unknown', reason: 'client_disconnected' } });
    stream.send({ cancel: { jobId, reason: 'client_disconnected' } });
    const terminal = await stream.terminal(jobId);
    expect(terminal.failed).toMatchObject({ code: 'canceled' });
    await new Promise((resolve) => setTimeout(resolve, 150));
    const events = stream.eventsOf(jobId);
    expect(events.slice(events.indexOf(terminal) + 1)).toEqual([]);
  });

  test('a passed deadline fails the job with deadline_exceeded', async () => {
    const { plane } = await setup({}, { tokensPerSecond: 20 });
    const stream = await plane.stream(0);
    const frame = assign({ stream: true, max_tokens: 500 }, { deadlineUnixMs: Date.now() + 150 });
    stream.send(frame);
    const terminal = await stream.terminal(frame.assign.jobId);
    expect(terminal.failed).toMatchObject({ code: 'deadline_exceeded' });
  });

  test('engine errors carry their code, status and body', async () => {
    const { plane } = await setup();
    const stream = await plane.stream(0);
    const frame = assign({ messages: 'not an array' });
    stream.send(frame);
    const terminal = await stream.terminal(frame.assign.jobId);
    expect(terminal.failed).toMatchObject({ code: 'engine_rejected', engineStatus: 400 });
    expect(JSON.parse(terminal.failed!.engineBody.toString()).error.type).toBe('invalid_request_error');
  });

  test('Drain finishes in-flight jobs, refuses new ones, ends the stream and stops with 0', async () => {
    // Longer than the 200 ms heartbeat, so a heartbeat shows the job in flight.
    const { plane, session } = await setup({}, { ttftMs: 600 });
    const stream = await plane.stream(0);
    const running = assign({});
    stream.send(running);
    await stream.until(() => stream.frames.find((candidate) => (candidate.heartbeat?.inFlight ?? 0) > 0));
    stream.send({ drain: { reason: 'replica removed' } });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const late = assign({});
    stream.send(late);
    expect((await stream.terminal(late.assign.jobId)).failed).toMatchObject({ code: 'agent_draining' });
    expect((await stream.terminal(running.assign.jobId)).completed).toBeDefined();
    await stream.until(() => stream.ended);
    expect(await session.finished).toEqual({ exitCode: 0, reason: 'drain requested: replica removed' });
  });

  test('jobs still running at the drain timeout fail with agent_draining', async () => {
    const { stream, session, jobId } = await slowJobInFlight({ drainTimeoutMs: 100 });
    const exit = session.stop('SIGTERM');
    expect((await stream.terminal(jobId)).failed).toMatchObject({ code: 'agent_draining' });
    expect((await exit).exitCode).toBe(0);
  });

  test('Reject bad_token stops the agent with exit code 2', async () => {
    const { plane, session } = await setup({}, {}, () => ({ reject: { code: 'bad_token', message: 'unknown token' } }));
    await plane.stream(0);
    expect(await session.finished).toEqual({ exitCode: 2, reason: expect.stringContaining('bad_token') });
    expect(plane.streams).toHaveLength(1);
  });

  test('Reject duplicate_agent is retried with backoff', async () => {
    let hellos = 0;
    const { plane } = await setup({}, {}, () => (hellos++ === 0 ? { reject: { code: 'duplicate_agent', message: 'busy' } } : welcomeFrame()));
    const second = await plane.stream(1);
    expect(second.hello?.agentId).toBe('agt_test');
  });

  test('reconnects with the same agent id after the stream ends, aborting jobs of the lost stream', async () => {
    const { plane, stream: first, jobId } = await slowJobInFlight();
    first.end();
    const second = await plane.stream(1);
    expect(second.hello).toMatchObject({ agentId: 'agt_test', joinToken: 'jt_secret' });
    const heartbeat = await second.until(() => second.frames.find((candidate) => candidate.heartbeat)?.heartbeat);
    expect(heartbeat.inFlight).toBe(0);
    expect(second.eventsOf(jobId)).toEqual([]);
  });

  test('keeps chunk order when the control plane reads slowly', async () => {
    const { plane } = await setup();
    const stream = await plane.stream(0);
    stream.call.pause();
    const frames = [assign({ stream: true, max_tokens: 8_000, seed: 1 }), assign({ stream: true, max_tokens: 8_000, seed: 2 })];
    for (const frame of frames) stream.send(frame);
    await new Promise((resolve) => setTimeout(resolve, 200));
    stream.call.resume();
    for (const frame of frames) {
      const terminal = await stream.terminal(frame.assign.jobId);
      expect(terminal.completed?.usage?.completionTokens).toBe(8_000);
      const events = sseEvents(stream.chunkText(frame.assign.jobId));
      expect(countTokens(streamedText(events))).toBe(8_000);
      expect((events.at(-1) as Record<string, any>).choices[0].finish_reason).toBe('length');
    }
    expect(stream.frames.some((frame) => frame.jobEvents && frame.jobEvents.events.length > 1)).toBe(true);
  });
});
