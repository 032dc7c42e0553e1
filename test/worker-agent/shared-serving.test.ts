/**
 * The agent's side of shared serving over a real gRPC stream: Hello.priority_capable per engine,
 * owner-first order after a Welcome with priority scheduling, guests refused without it, and
 * the openai engine sending guests with `"priority": 10` while owner bodies stay byte for byte
 * what they were before shared serving; and each job's prefix-cache salt reaching the engine as
 * `cache_salt`, or no guests where the engine cannot salt (WORKER_ENGINE_CACHE_SALT=off, a
 * llama.cpp server).
 */
import type { Assign } from '../../proto/worker/v1/index';
import { loadAgentOptions } from '../../worker-agent/agent-options';
import { AgentSession } from '../../worker-agent/agent-session';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS } from '../../worker-agent/engines/cpu-engine-options';
import { createEngine } from '../../worker-agent/create-engine';
import type { Engine } from '../../worker-agent/engines/engine';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';
import { OptionsError } from '../../worker-agent/option-fields';
import { startEchoEngine, type EchoEngine } from './support/echo-engine';
import { FakeControlPlane, welcomeFrame, type FakeAgentStream } from './support/fake-control-plane';

const disposables: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

const REQUIRED = { WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_JOIN_TOKEN: 'jt' };

/** An agent over real gRPC to a fake control plane whose Welcome says `priorityScheduling`. */
async function connect(engine: Engine, priorityScheduling: boolean, maxConcurrency = 4): Promise<FakeAgentStream> {
  const plane = await FakeControlPlane.start({ answerHello: () => welcomeFrame({ priorityScheduling }) });
  disposables.push(() => plane.close());
  const session = new AgentSession({
    options: {
      controlPlaneAddress: plane.address, joinToken: 'jt', agentId: 'agt_shared', maxConcurrency,
      reconnectInitialMs: 5, reconnectMaxMs: 20, drainTimeoutMs: 1_000, gpus: [],
    },
    engine, agentVersion: '9.9.9',
  });
  disposables.push(() => session.stop('test over'));
  session.start();
  await engine.start();
  const stream = await plane.stream(0);
  await stream.ready();
  return stream;
}

async function echoEngine(ownedBy?: string): Promise<EchoEngine> {
  const engine = await startEchoEngine(ownedBy);
  disposables.push(() => engine.close());
  return engine;
}

function openAiEngine(url: string, priorityScheduling?: boolean, cacheSalt?: boolean): OpenAiEngine {
  const engine = new OpenAiEngine({ url, connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, priorityScheduling, cacheSalt });
  disposables.push(() => engine.close());
  return engine;
}

function assign(jobId: string, body: Record<string, unknown>, guest = false, fields: Partial<Assign> = {}): { assign: Assign } {
  return {
    assign: {
      jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 10_000, model: 'catalog/model',
      stream: body.stream === true, includeUsage: false, body: Buffer.from(JSON.stringify(body)), ...(guest ? { guest: true } : {}), ...fields,
    },
  };
}

/** A client body with an unknown nested field and non-ASCII text: both must reach the engine as they were. */
const CLIENT_BODY = { model: 'x', messages: [{ role: 'user', content: 'héllo ✓' }], temperature: 0.5, vendor_field: { keep: [1, 2] }, max_tokens: 7 };

describe('Hello.priority_capable', () => {
  test.each([
    ['cpu', true, []],
    ['llama-cpp', true, ['--engine', 'llama-cpp', '--model-path', '/nowhere/model.gguf']],
    ['openai', false, ['--engine', 'openai', '--engine-url', 'http://127.0.0.1:9']],
    ['openai with --engine-priority-scheduling', true, ['--engine', 'openai', '--engine-url', 'http://127.0.0.1:9', '--engine-priority-scheduling']],
  ])('%s → %s', (_name, capable, argv) => {
    // llama-cpp opens nothing until prepare(): constructing it is enough to read the flag.
    expect(createEngine(loadAgentOptions(argv as string[], REQUIRED)).priorityCapable).toBe(capable);
  });

  test('is sent in the Hello', async () => {
    const engine = await echoEngine();
    expect((await connect(new CpuEngine(), false)).hello?.priorityCapable).toBe(true);
    expect((await connect(openAiEngine(engine.url), false)).hello?.priorityCapable).toBe(false);
    expect((await connect(openAiEngine(engine.url, true), false)).hello?.priorityCapable).toBe(true);
  });

  test('WORKER_ENGINE_PRIORITY_SCHEDULING: off by default, a bare flag or 1/true/yes turns it on, nonsense is refused', () => {
    expect(loadAgentOptions([], REQUIRED).enginePriorityScheduling).toBe(false);
    expect(loadAgentOptions(['--engine-priority-scheduling'], REQUIRED).enginePriorityScheduling).toBe(true);
    expect(loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_PRIORITY_SCHEDULING: '1' }).enginePriorityScheduling).toBe(true);
    expect(loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_PRIORITY_SCHEDULING: 'no' }).enginePriorityScheduling).toBe(false);
    expect(() => loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_PRIORITY_SCHEDULING: 'maybe' })).toThrow(OptionsError);
    expect(() => loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_PRIORITY_SCHEDULING: 'maybe' })).toThrow(/--engine-priority-scheduling \/ WORKER_ENGINE_PRIORITY_SCHEDULING/);
  });
});

describe('the openai engine on a shared replica', () => {
  test('a guest job carries "priority": 10 (over any the client sent); owner bodies are byte-identical to a replica without sharing', async () => {
    const shared = await echoEngine();
    const plain = await echoEngine();
    const sharedStream = await connect(openAiEngine(shared.url, true), true);
    const plainStream = await connect(openAiEngine(plain.url), false);
    for (const stream of [sharedStream, plainStream]) {
      stream.send(assign('owner_json', CLIENT_BODY));
      stream.send(assign('owner_stream', { ...CLIENT_BODY, stream: true }));
      await stream.terminal('owner_json');
      await stream.terminal('owner_stream');
    }
    sharedStream.send(assign('guest_json', CLIENT_BODY, true));
    sharedStream.send(assign('guest_stream', { ...CLIENT_BODY, stream: true, priority: -100 }, true));
    expect((await sharedStream.terminal('guest_json')).completed).toBeDefined();
    expect((await sharedStream.terminal('guest_stream')).completed).toBeDefined();
    expect(sharedStream.chunkText('guest_stream')).toContain('you said: héllo ✓');

    expect(shared.requests.map((request) => request.raw)).toHaveLength(4);
    expect(shared.requests[0].raw.equals(plain.requests[0].raw)).toBe(true);
    expect(shared.requests[1].raw.equals(plain.requests[1].raw)).toBe(true);
    expect(shared.requests[0].body).not.toHaveProperty('priority');
    const [guestJson, guestStream] = shared.requests.slice(2).map((request) => request.body);
    // No salt from this (older) control plane: the guest job is a cache tenant of its own (cache-tenant.ts).
    expect(guestJson).toEqual({ ...shared.requests[0].body, priority: 10, cache_salt: 'job:guest_json' });
    expect(guestStream).toMatchObject({ priority: 10, stream: true, vendor_field: { keep: [1, 2] } });
  });

  test('an engine without priority scheduling refuses a guest job (invalid_job) even if the Welcome asked for it, and sends the engine nothing', async () => {
    const engine = await echoEngine();
    const stream = await connect(openAiEngine(engine.url), true);
    stream.send(assign('guest', CLIENT_BODY, true));
    expect((await stream.terminal('guest')).failed).toMatchObject({ code: 'invalid_job', message: 'this replica does not serve guests' });
    stream.send(assign('owner', CLIENT_BODY));
    expect((await stream.terminal('owner')).completed).toBeDefined();
    expect(engine.requests).toHaveLength(1);
  });

  test('the adapter itself refuses a guest job when its engine runs no priority scheduling', async () => {
    const engine = await echoEngine();
    const adapter = openAiEngine(engine.url);
    const sink = { chunk: () => undefined, output: () => undefined };
    await expect(adapter.run({ ...assign('guest', CLIENT_BODY, true).assign }, sink, new JobCancellation())).rejects.toMatchObject({ code: 'invalid_job' });
    expect(engine.requests).toHaveLength(0);
  });
});

describe('the agent queue on a shared replica', () => {
  /** A CPU engine slow enough that one job holds the only slot while others queue. */
  const slowCpu = () => new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, tokensPerSecond: 50 });
  const chat = (maxTokens: number) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens, stream: true });

  test('a waiting owner job runs before guests that waited longer; the heartbeat counts both queues', async () => {
    const stream = await connect(slowCpu(), true, 1);
    // 50 tokens at 50/s: a second in the slot, several 200 ms heartbeats while the others wait.
    stream.send(assign('owner_running', chat(50)));
    stream.send({ assignBatch: { assigns: [assign('guest_1', chat(2), true).assign, assign('guest_2', chat(2), true).assign, assign('owner_late', chat(2)).assign] } });
    const heartbeat = await stream.until(() => stream.heartbeats.find((candidate) => candidate.queued === 3));
    expect(heartbeat.inFlight).toBe(1);
    for (const jobId of ['guest_2', 'guest_1', 'owner_late', 'owner_running']) expect((await stream.terminal(jobId)).completed).toBeDefined();
    const order = stream.events.filter((event) => event.completed).map((event) => event.jobId);
    expect(order).toEqual(['owner_running', 'owner_late', 'guest_1', 'guest_2']);
  });

  test('without priority scheduling the queue stays one FIFO and guests are refused', async () => {
    const stream = await connect(slowCpu(), false, 1);
    stream.send(assign('first', chat(10)));
    stream.send({ assignBatch: { assigns: [assign('second', chat(2)).assign, assign('guest', chat(2), true).assign, assign('third', chat(2)).assign] } });
    expect((await stream.terminal('guest')).failed).toMatchObject({ code: 'invalid_job', message: 'this replica does not serve guests' });
    for (const jobId of ['first', 'second', 'third']) await stream.terminal(jobId);
    expect(stream.events.filter((event) => event.completed).map((event) => event.jobId)).toEqual(['first', 'second', 'third']);
  });
});

describe('prefix-cache salts on the openai engine', () => {
  const OWNER_SALT = 'o'.repeat(43);
  const GUEST_SALT = 'g'.repeat(43);
  const CHAT = { model: 'x', messages: [{ role: 'user', content: 'hello' }], max_tokens: 3 };
  const sink = { chunk: () => undefined, output: () => undefined };

  test('each job\'s salt reaches the engine as cache_salt, over any the body carried; a guest job gets its own, an unsalted owner job none', async () => {
    const engine = await echoEngine('vllm');
    const stream = await connect(openAiEngine(engine.url, true), true);
    stream.send(assign('owner', CHAT, false, { cacheSalt: OWNER_SALT }));
    stream.send(assign('owner_stream', { ...CHAT, stream: true, cache_salt: 'chosen-by-client' }, false, { cacheSalt: OWNER_SALT }));
    stream.send(assign('guest', { ...CHAT, cache_salt: OWNER_SALT }, true, { cacheSalt: GUEST_SALT }));
    stream.send(assign('completion', { model: 'x', prompt: 'hi', max_tokens: 2 }, false, { kind: 'JOB_KIND_COMPLETION', cacheSalt: OWNER_SALT }));
    stream.send(assign('unsalted', { ...CHAT, cache_salt: 'chosen-by-client' }));
    for (const jobId of ['owner', 'owner_stream', 'guest', 'completion', 'unsalted']) expect((await stream.terminal(jobId)).completed).toBeDefined();
    expect(engine.requests.map((request) => request.body.cache_salt ?? 'none').sort()).toEqual([GUEST_SALT, OWNER_SALT, OWNER_SALT, OWNER_SALT, 'none'].sort());
    expect(engine.requests.find((request) => request.body.priority === 10)!.body.cache_salt).toBe(GUEST_SALT);
    expect(engine.requests.find((request) => request.path === '/v1/completions')!.body.cache_salt).toBe(OWNER_SALT);
  });

  test('a guest job from a control plane older than the salt gets a salt of its own, shared with no other job', async () => {
    const engine = await echoEngine('vllm');
    const stream = await connect(openAiEngine(engine.url, true), true);
    stream.send(assign('old_guest_1', CHAT, true));
    stream.send(assign('old_guest_2', CHAT, true));
    await stream.terminal('old_guest_1');
    await stream.terminal('old_guest_2');
    const [first, second] = engine.requests.map((request) => request.body.cache_salt);
    expect(typeof first).toBe('string');
    expect(first).not.toBe(second);
  });

  test('WORKER_ENGINE_CACHE_SALT=off: no salt sent (a body\'s removed), and no guests: Hello says it cannot, the adapter refuses them', async () => {
    const engine = await echoEngine('vllm');
    const adapter = openAiEngine(engine.url, true, false);
    expect(adapter.priorityCapable).toBe(false);
    const stream = await connect(adapter, true);
    expect(stream.hello?.priorityCapable).toBe(false);
    stream.send(assign('owner', { ...CHAT, cache_salt: 'chosen-by-client' }, false, { cacheSalt: OWNER_SALT }));
    expect((await stream.terminal('owner')).completed).toBeDefined();
    expect(engine.requests[0].body).not.toHaveProperty('cache_salt');
    await expect(adapter.run(assign('guest', CHAT, true, { cacheSalt: GUEST_SALT }).assign, sink, new JobCancellation()))
      .rejects.toMatchObject({ code: 'invalid_job', message: expect.stringContaining('WORKER_ENGINE_CACHE_SALT=off') });
    expect(engine.requests).toHaveLength(1);
  });

  test('a llama.cpp server (owned_by "llamacpp") never serves a guest, priority flag or not: invalid_job, and the engine sees nothing of it', async () => {
    const engine = await echoEngine('llamacpp');
    const stream = await connect(openAiEngine(engine.url, true), true);
    stream.send(assign('guest', CHAT, true, { cacheSalt: GUEST_SALT }));
    expect((await stream.terminal('guest')).failed).toMatchObject({ code: 'invalid_job', message: expect.stringContaining('llama.cpp server') });
    stream.send(assign('owner', CHAT, false, { cacheSalt: OWNER_SALT }));
    expect((await stream.terminal('owner')).completed).toBeDefined();
    expect(engine.requests).toHaveLength(1);
  });

  test('an embeddings body is left without a salt (TEI refuses fields it does not know)', async () => {
    const engine = await echoEngine('vllm');
    const stream = await connect(openAiEngine(engine.url), false);
    stream.send(assign('embed', { model: 'x', input: 'hello' }, false, { kind: 'JOB_KIND_EMBEDDING', cacheSalt: OWNER_SALT }));
    await stream.terminal('embed');
    expect(engine.requests[0].path).toBe('/v1/embeddings');
    expect(engine.requests[0].body).not.toHaveProperty('cache_salt');
  });

  test('WORKER_ENGINE_CACHE_SALT: on by default, off turns it off, nonsense is refused naming the flag and variable', () => {
    expect(loadAgentOptions([], REQUIRED).engineCacheSalt).toBe('on');
    expect(loadAgentOptions(['--engine-cache-salt', 'off'], REQUIRED).engineCacheSalt).toBe('off');
    expect(loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_CACHE_SALT: 'off' }).engineCacheSalt).toBe('off');
    expect(() => loadAgentOptions([], { ...REQUIRED, WORKER_ENGINE_CACHE_SALT: 'maybe' })).toThrow(/--engine-cache-salt \/ WORKER_ENGINE_CACHE_SALT/);
    const openai = ['--engine', 'openai', '--engine-url', 'http://127.0.0.1:9', '--engine-priority-scheduling'];
    expect(createEngine(loadAgentOptions(openai, REQUIRED)).priorityCapable).toBe(true);
    expect(createEngine(loadAgentOptions([...openai, '--engine-cache-salt', 'off'], REQUIRED)).priorityCapable).toBe(false);
  });
});
