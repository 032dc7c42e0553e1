/**
 * The compiled agent as the control plane runs it: `node dist/worker-agent/main.js` with the
 * WORKER_* variables (`npm test` builds dist/ first).
 */
import { assertAgentBuilt, spawnAgent, type AgentProcess } from './support/agent-process';
import { FakeControlPlane } from './support/fake-control-plane';

const disposables: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

beforeAll(() => {
  assertAgentBuilt();
});

/** Fast reconnects; the test's variables on top. */
function spawnQuickAgent(env: Record<string, string>): AgentProcess {
  return spawnAgent({ WORKER_RECONNECT_INITIAL_MS: '10', WORKER_RECONNECT_MAX_MS: '50', ...env }, disposables);
}

async function controlPlane(answerReject?: string): Promise<FakeControlPlane> {
  const plane = await FakeControlPlane.start(answerReject ? { answerHello: () => ({ reject: { code: answerReject, message: 'refused' } }) } : {});
  disposables.push(() => plane.close());
  return plane;
}

function assignFrame(jobId: string, body: Record<string, unknown>) {
  return {
    assign: {
      jobId, kind: 'JOB_KIND_CHAT_COMPLETION' as const, deadlineUnixMs: Date.now() + 10_000, includeUsage: false, model: 'm',
      stream: body.stream === true, body: Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], ...body })),
    },
  };
}

describe('worker agent process', () => {
  test('SIGTERM drains: in-flight job completes, new jobs are refused, exit code 0', async () => {
    const plane = await controlPlane();
    const agent = spawnQuickAgent({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_AGENT_ID: 'agt_proc', WORKER_CPU_TEST_CONTROLS: '1' });
    const stream = await plane.stream(0, 10_000);
    expect(stream.hello).toMatchObject({ agentId: 'agt_proc', engine: { kind: 'cpu' }, maxConcurrency: 64, agentVersion: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    // In flight long enough for a 200 ms heartbeat to report it on a loaded machine (at 400 ms it
    // once finished before any heartbeat did, beside the whole suite).
    stream.send(assignFrame('job_slow', { stream: true, max_tokens: 5, cpu_engine: { ttft_ms: 1_500 } }));
    await stream.until(() => stream.frames.find((candidate) => (candidate.heartbeat?.inFlight ?? 0) > 0));
    agent.child.kill('SIGTERM');
    await new Promise((resolve) => setTimeout(resolve, 100));
    stream.send(assignFrame('job_late', {}));
    expect((await stream.terminal('job_late')).failed).toMatchObject({ code: 'agent_draining' });
    expect((await stream.terminal('job_slow')).completed?.usage?.completionTokens).toBe(5);
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    expect(stream.ended).toBe(true);
  });

  test('Reject bad_token exits with code 2', async () => {
    const plane = await controlPlane('bad_token');
    const agent = spawnQuickAgent({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'revoked' });
    expect((await agent.exited).code).toBe(2);
    expect(agent.stderr()).toContain('bad_token');
  });

  test('bad configuration exits with code 2 and names the variable', async () => {
    const agent = spawnQuickAgent({ WORKER_JOIN_TOKEN: 'jt', WORKER_ENGINE: 'openai' });
    expect((await agent.exited).code).toBe(2);
    expect(agent.stderr()).toContain('WORKER_CONTROL_PLANE');
  });

  test('WORKER_EXIT_WITH_PARENT: when the parent\'s end of the stdin pipe closes, the agent exits at once with code 4, without a drain', async () => {
    const plane = await controlPlane();
    const agent = spawnAgent({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_EXIT_WITH_PARENT: 'true', WORKER_CPU_TEST_CONTROLS: '1' }, disposables, { stdin: 'pipe' });
    const stream = await plane.stream(0, 10_000);
    stream.send(assignFrame('job_orphaned', { stream: true, max_tokens: 600, cpu_engine: { tokens_per_second: 10 } }));
    await stream.until(() => stream.frames.find((candidate) => (candidate.heartbeat?.inFlight ?? 0) > 0));
    // What the kernel does to the pipe when the parent dies, kill -9 included.
    const closedAt = Date.now();
    agent.child.stdin!.destroy();
    expect(await agent.exited).toEqual({ code: 4, signal: null });
    // A drain would have let the job run its 60 s (or the drain timeout); room for a loaded machine.
    expect(Date.now() - closedAt).toBeLessThan(15_000);
    expect(stream.terminalOf('job_orphaned')).toBeUndefined();
    expect(agent.stderr()).toContain('the process that spawned the agent is gone');
  });

  test('an OTLP protocol this build cannot send exits with code 2 and names the variable', async () => {
    const agent = spawnQuickAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_JOIN_TOKEN: 'jt', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' });
    expect((await agent.exited).code).toBe(2);
    expect(agent.stderr()).toContain("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' is not supported");
  });

  test('WORKER_EXIT_WITH_PARENT without a pipe on stdin is refused with code 2 (it would exit at once, or never)', async () => {
    const agent = spawnQuickAgent({ WORKER_CONTROL_PLANE: '127.0.0.1:1', WORKER_JOIN_TOKEN: 'jt', WORKER_EXIT_WITH_PARENT: 'true' });
    expect((await agent.exited).code).toBe(2);
    expect(agent.lastLine()).toMatch(/WORKER_EXIT_WITH_PARENT: stdin is a terminal or device; .* needs a pipe/);
  });

  test('the crash switch kills the process mid-stream', async () => {
    const plane = await controlPlane();
    const agent = spawnQuickAgent({ WORKER_CONTROL_PLANE: plane.address, WORKER_JOIN_TOKEN: 'jt', WORKER_CPU_CRASH_AFTER_TOKENS: '3', WORKER_CPU_TOKENS_PER_SECOND: '100' });
    const stream = await plane.stream(0, 10_000);
    stream.send(assignFrame('job_crash', { stream: true, max_tokens: 50 }));
    expect(await agent.exited).toEqual({ code: null, signal: 'SIGKILL' });
    await stream.until(() => stream.ended);
    expect(stream.terminalOf('job_crash')).toBeUndefined();
  });
});
