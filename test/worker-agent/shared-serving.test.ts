/**
 * The agent's side of shared serving over a real gRPC stream: Hello.priority_capable per engine,
 * owner-first order after a Welcome with priority scheduling, guests refused without it, and
 * the openai engine sending guests with `"priority": 10` while owner bodies stay byte for byte
 * what they were before shared serving.
 */
import type { Assign } from '../../proto/worker/v1/index';
import { loadAgentOptions } from '../../worker-agent/agent-options';
import { AgentSession } from '../../worker-agent/agent-session';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS } from '../../worker-agent/engines/cpu-engine-options';
import { createEngine } from '../../worker-agent/engines/create-engine';
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

async function echoEngine(): Promise<EchoEngine> {
  const engine = await startEchoEngine();
  disposables.push(() => engine.close());
  return engine;
}

function openAiEngine(url: string, priorityScheduling?: boolean): OpenAiEngine {
  const engine = new OpenAiEngine({ url, connections: 4, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, priorityScheduling });
  disposables.push(() => engine.close());
  return engine;
}

function assign(jobId: string, body: Record<string, unknown>, guest = false): { assign: Assign } {
  return {
    assign: {
      jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 10_000, model: 'catalog/model',
      stream: body.stream === true, includeUsage: false, body: Buffer.from(JSON.stringify(body)), ...(guest ? { guest: true } : {}),
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
    expect(guestJson).toEqual({ ...shared.requests[0].body, priority: 10 });
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
