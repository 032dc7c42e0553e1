/**
 * A guest's prompt and output never reach the agent's logs, at any level: the compiled agent
 * runs at WORKER_LOG_LEVEL=trace with each engine kind, is welcomed with priority scheduling,
 * and serves guest jobs whose prompts (and so outputs and engine error bodies) carry a marker;
 * the marker must not appear on its stderr or stdout. The control that the search would find a
 * leak: a Drain reason carrying a second marker, which the agent does log.
 */
import { once } from 'node:events';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Assign, JobEvent } from '../../proto/worker/v1/index';
import { writeTinyGguf } from '../../worker-agent/llama/tiny-gguf';
import { assertAgentBuilt, spawnAgent } from './support/agent-process';
import { startEchoEngine } from './support/echo-engine';
import { FakeControlPlane, welcomeFrame, type FakeAgentStream } from './support/fake-control-plane';

const GUEST_MARKER = 'GUEST-SECRET-5f3a9c';
const CONTROL_MARKER = 'DRAIN-REASON-81be2d';

const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'guest-log-test-'));
const disposables: Array<() => Promise<unknown>> = [];

beforeAll(() => assertAgentBuilt());
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});
afterAll(() => fs.rmSync(directory, { recursive: true, force: true }));

function guestAssign(jobId: string, body: Record<string, unknown> | Buffer, overrides: Partial<Assign> = {}): Assign {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(JSON.stringify(body));
  return {
    jobId, kind: 'JOB_KIND_CHAT_COMPLETION', deadlineUnixMs: Date.now() + 30_000, model: 'catalog/model', guest: true,
    stream: !Buffer.isBuffer(body) && body.stream === true, includeUsage: false, body: bytes, ...overrides,
  };
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ messages: [{ role: 'user', content }], max_tokens: 8, ...extra });
const secret = (what: string) => `${what} ${GUEST_MARKER} (do not log)`;

/** The same guest jobs for every engine: streamed, whole, a body that is not JSON, and a canceled stream. */
function commonGuestJobs(): Assign[] {
  return [
    guestAssign('guest_stream', chat(secret('stream'), { stream: true })),
    guestAssign('guest_json', chat(secret('json'))),
    guestAssign('guest_not_json', Buffer.from(`{"messages": ${GUEST_MARKER}`)),
  ];
}

interface EngineCase {
  readonly name: string;
  readonly env: () => Promise<Record<string, string>>;
  /** Guest jobs that fail in the engine, and what the test expects of their terminal events. */
  readonly failing: Array<{ assign: Assign; check: (event: JobEvent) => void }>;
  /** Upper bound on starting the engine (llama.cpp loads a model). */
  readonly readyMs: number;
}

const cases: EngineCase[] = [
  {
    name: 'openai (an engine whose 400 quotes the prompt)',
    readyMs: 10_000,
    env: async () => {
      const engine = await startEchoEngine();
      disposables.push(() => engine.close());
      return { WORKER_ENGINE: 'openai', WORKER_ENGINE_URL: engine.url, WORKER_ENGINE_PRIORITY_SCHEDULING: '1' };
    },
    failing: [{
      assign: guestAssign('guest_rejected', chat(secret('#reject'))),
      // The marker did reach the agent and passed back to the control plane, where it belongs.
      check: (event) => {
        expect(event.failed).toMatchObject({ code: 'engine_rejected', engineStatus: 400 });
        expect(event.failed!.engineBody.toString()).toContain(GUEST_MARKER);
      },
    }],
  },
  {
    name: 'cpu',
    readyMs: 10_000,
    env: async () => ({ WORKER_ENGINE: 'cpu', WORKER_CPU_TEST_CONTROLS: '1' }),
    failing: [
      { assign: guestAssign('guest_engine_error', chat(secret('fail'), { stream: true, cpu_engine: { fail_after_tokens: 2 } })), check: (event) => expect(event.failed?.code).toBe('engine_error') },
      { assign: guestAssign('guest_bad_param', chat(secret('bad'), { n: 'many' })), check: (event) => expect(event.failed?.code).toBe('engine_rejected') },
    ],
  },
  {
    name: 'llama-cpp (node-llama-cpp at our settings)',
    readyMs: 30_000,
    env: async () => ({
      WORKER_ENGINE: 'llama-cpp', WORKER_LLAMA_MODEL_PATH: writeTinyGguf(path.join(directory, 'tiny.gguf'), { contextLength: 512 }),
      WORKER_LLAMA_THREADS: '1', WORKER_LLAMA_CONTEXT_SIZE: '512', WORKER_LLAMA_PARALLEL: '2',
    }),
    failing: [{
      assign: guestAssign('guest_too_long', chat(secret('long'), { max_tokens: 5_000 })),
      check: (event) => expect(event.failed).toMatchObject({ code: 'engine_rejected', engineStatus: 400 }),
    }, {
      // A guest's schema and tools become a grammar llama.cpp compiles: names and values carry the marker.
      assign: guestAssign('guest_schema', chat(secret('schema'), {
        max_tokens: 64, response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'object', properties: { [GUEST_MARKER]: { enum: [GUEST_MARKER] } } } } },
      })),
      check: (event) => expect(event.completed).toBeDefined(),
    }, {
      assign: guestAssign('guest_tools', chat(secret('tools'), {
        max_tokens: 64, tool_choice: 'required', tools: [{ type: 'function', function: { name: 'f', description: GUEST_MARKER, parameters: { type: 'object', properties: { [GUEST_MARKER]: { const: GUEST_MARKER } } } } }],
      })),
      check: (event) => expect(event.completed).toBeDefined(),
    }, {
      assign: guestAssign('guest_refused_schema', chat(secret('pattern'), { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: GUEST_MARKER } } } })),
      check: (event) => expect(event.failed).toMatchObject({ code: 'engine_rejected', engineStatus: 400 }),
    }],
  },
];

describe('guest content stays out of the agent logs at trace level', () => {
  test.each(cases)('$name', async ({ env, failing, readyMs }) => {
    const plane = await FakeControlPlane.start({ answerHello: () => welcomeFrame({ priorityScheduling: true }) });
    disposables.push(() => plane.close());
    const agent = spawnAgent({
      WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_LOG_LEVEL: 'trace', WORKER_MAX_CONCURRENCY: '2',
      ...(await env()),
    }, disposables);
    const closed = once(agent.child, 'close');
    const stream: FakeAgentStream = await plane.stream(0, readyMs);
    expect(stream.hello?.priorityCapable).toBe(true);
    await stream.ready(readyMs);

    const jobs = [...commonGuestJobs(), ...failing.map((job) => job.assign)];
    stream.send({ assignBatch: { assigns: jobs } });
    const canceled = guestAssign('guest_canceled', chat(secret('cancel #slow'), { stream: true, max_tokens: 400, cpu_engine: { tokens_per_second: 20 } }));
    stream.send({ assign: canceled });
    await stream.until(() => stream.eventsOf('guest_canceled').find((event) => event.chunk), readyMs);
    stream.send({ cancel: { jobId: 'guest_canceled', reason: 'client_disconnected' } });

    expect((await stream.terminal('guest_stream', readyMs)).completed).toBeDefined();
    expect((await stream.terminal('guest_json', readyMs)).completed).toBeDefined();
    expect((await stream.terminal('guest_not_json')).failed?.code).toBe('invalid_job');
    expect((await stream.terminal('guest_canceled')).failed?.code).toBe('canceled');
    for (const job of failing) job.check(await stream.terminal(job.assign.jobId, readyMs));

    stream.send({ drain: { reason: `test over ${CONTROL_MARKER}` } });
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    await closed;
    const logs = agent.stderr() + agent.stdout();
    // Controls: the agent logged at trace with priority scheduling on, and the search finds what it does log.
    expect(logs).toContain('"priorityScheduling":true');
    expect(logs).toContain(CONTROL_MARKER);
    expect(logs).not.toContain(GUEST_MARKER);
  });
});
