import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { AgentSession } from '../../worker-agent/agent-session';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import { DEFAULT_CPU_ENGINE_OPTIONS, loadCpuEngineOptions } from '../../worker-agent/engines/cpu-engine-options';
import { actOutStartup, cpuStartupPlanOption } from '../../worker-agent/engines/cpu-startup';
import { EngineStartError } from '../../worker-agent/engines/engine-start-error';
import { LoadingEngine } from '../../worker-agent/engines/loading-engine';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { StartupPhases } from '../../worker-agent/startup-phases';
import { FakeControlPlane } from './support/fake-control-plane';

const disposables: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

/** A clock the test moves by hand. */
function manualClock(start = 1_000_000) {
  let now = start;
  return { now: () => now, advance: (ms: number) => { now += ms; } };
}

describe('StartupPhases', () => {
  test('times each phase from begin to end; a running phase reports its time so far and is not done', () => {
    const clock = manualClock();
    let changes = 0;
    const phases = new StartupPhases(() => { changes += 1; }, clock.now);
    phases.begin('download');
    clock.advance(1_500);
    phases.end('download', { detail: 'fetched 1.0 MiB', bytes: 1_048_576 });
    phases.begin('load', 'loading');
    clock.advance(250);
    expect(phases.current).toBe('load');
    expect(phases.frames()).toEqual([
      { name: 'download', startedUnixMs: 1_000_000, durationMs: 1_500, done: true, detail: 'fetched 1.0 MiB', bytes: 1_048_576 },
      { name: 'load', startedUnixMs: 1_001_500, durationMs: 250, done: false, detail: 'loading', bytes: 0 },
    ]);
    clock.advance(250);
    phases.end('load');
    expect(phases.current).toBeNull();
    expect(phases.frames()[1]).toMatchObject({ durationMs: 500, done: true, detail: 'loading' });
    // Each begin and end is told (the agent sends a heartbeat for it).
    expect(changes).toBe(4);
  });

  test('time(): a failure leaves the phase running, saying why; success ends it with what the result says', async () => {
    const clock = manualClock();
    const phases = new StartupPhases(() => {}, clock.now);
    await expect(phases.time('load', async () => { clock.advance(40); throw new Error('model file is not a GGUF'); })).rejects.toThrow('not a GGUF');
    expect(phases.frames()).toEqual([{ name: 'load', startedUnixMs: 1_000_000, durationMs: 40, done: false, detail: 'failed: model file is not a GGUF', bytes: 0 }]);
    // Begun again (a retry), the phase starts over.
    const prompt = await phases.time('load', async () => { clock.advance(10); return 7; }, (tokens) => ({ detail: `${tokens} tokens` }));
    expect(prompt).toBe(7);
    expect(phases.frames()).toEqual([{ name: 'load', startedUnixMs: 1_000_040, durationMs: 10, done: true, detail: '7 tokens', bytes: 0 }]);
  });
});

describe('the CPU engine\'s acted-out start-up (WORKER_STARTUP_PHASES_MS)', () => {
  test('parses phase=milliseconds pairs, hang and fail; refuses unknown, repeated or malformed phases naming the variable', () => {
    expect(loadCpuEngineOptions({ WORKER_STARTUP_PHASES_MS: 'download=90000, load=30000,warm_up=2000' }).startup).toEqual([
      { name: 'download', length: 90_000 }, { name: 'load', length: 30_000 }, { name: 'warm_up', length: 2_000 },
    ]);
    expect(loadCpuEngineOptions({ WORKER_STARTUP_PHASES_MS: 'download=10,load=hang' }).startup).toEqual([{ name: 'download', length: 10 }, { name: 'load', length: 'hang' }]);
    expect(loadCpuEngineOptions({ WORKER_STARTUP_PHASES_MS: 'load=fail' }).startup).toEqual([{ name: 'load', length: 'fail' }]);
    expect(loadCpuEngineOptions({}).startup).toBeUndefined();
    for (const bad of ['compile=100', 'load=100,load=200', 'load=-5', 'load', 'load=1.5']) {
      expect(() => loadCpuEngineOptions({ WORKER_STARTUP_PHASES_MS: bad })).toThrow(/WORKER_STARTUP_PHASES_MS: must be phase=milliseconds pairs/);
    }
    expect(cpuStartupPlanOption().safeParse('').success).toBe(true);
  });

  test('plays each phase in order with progress over the whole start-up, and times it', async () => {
    const phases = new StartupPhases();
    const reports: Array<[number, string]> = [];
    await actOutStartup([{ name: 'download', length: 60 }, { name: 'load', length: 30 }, { name: 'warm_up', length: 10 }], (percent, stage) => reports.push([percent, stage]), phases);
    const frames = phases.frames();
    expect(frames.map((phase) => [phase.name, phase.done])).toEqual([['download', true], ['load', true], ['warm_up', true]]);
    // Timers never fire early by more than a millisecond: each phase took at least its length.
    expect(frames[0].durationMs).toBeGreaterThanOrEqual(59);
    expect(frames[1].durationMs).toBeGreaterThanOrEqual(29);
    const percents = reports.map(([percent]) => percent);
    expect(percents).toEqual([...percents].sort((a, b) => a - b));
    expect(new Set(reports.map(([, stage]) => stage))).toEqual(new Set(['downloading the model weights', 'loading the weights into memory', 'warming up the engine']));
    expect(reports.find(([, stage]) => stage === 'loading the weights into memory')![0]).toBeCloseTo(60, 5);
  });

  test('fail: the engine cannot start (the agent exits with code 3), the phase saying where', async () => {
    const phases = new StartupPhases();
    await expect(actOutStartup([{ name: 'download', length: 5 }, { name: 'load', length: 'fail' }], undefined, phases)).rejects.toBeInstanceOf(EngineStartError);
    expect(phases.frames().map((phase) => [phase.name, phase.done, phase.detail])).toEqual([
      ['download', true, 'acted out by the CPU engine'], ['load', false, 'failed: acted out by the CPU engine'],
    ]);
  });
});

describe('an agent\'s heartbeats carry its start-up phases until it is ready', () => {
  async function agentWith(engine: LoadingEngine, cachedModels: string[] = []) {
    const plane = await FakeControlPlane.start();
    disposables.push(() => plane.close());
    const session = new AgentSession({
      options: { controlPlaneAddress: plane.address, joinToken: 'jt_x', agentId: 'agt_phases', maxConcurrency: 2, reconnectInitialMs: 5, reconnectMaxMs: 20, drainTimeoutMs: 500, gpus: [] },
      engine, agentVersion: '1.0.0', startupPhases: engine.phases, cachedModels: () => cachedModels,
    });
    disposables.push(() => session.stop('test over'));
    return { plane, session };
  }

  test('each phase as it begins and ends, the complete list on the first ready heartbeat, then none; the Hello names the cached models', async () => {
    let session: AgentSession | undefined;
    const phases = new StartupPhases(() => session?.heartbeatNow());
    const engine = new LoadingEngine(new CpuEngine({ ...DEFAULT_CPU_ENGINE_OPTIONS, startup: [{ name: 'download', length: 150 }, { name: 'load', length: 100 }, { name: 'warm_up', length: 50 }] }),
      () => session?.heartbeatNow(), phases);
    const agent = await agentWith(engine, ['meta-llama/Llama-3.1-8B-Instruct']);
    session = agent.session;
    session.start();
    const stream = await agent.plane.stream(0);
    expect(stream.hello?.cachedModels).toEqual(['meta-llama/Llama-3.1-8B-Instruct']);
    await stream.until(() => stream.heartbeats.length > 0);
    await engine.start();
    const ready = await stream.ready();
    expect(ready.startupPhases.map((phase) => [phase.name, phase.done])).toEqual([['download', true], ['load', true], ['warm_up', true]]);
    const starting = stream.heartbeats.filter((heartbeat) => heartbeat.engineHealth === 'ENGINE_HEALTH_STARTING');
    // The control plane heard the start-up stuck in each phase as it went.
    for (const name of ['download', 'load', 'warm_up']) {
      expect(starting.some((heartbeat) => heartbeat.startupPhases.some((phase) => phase.name === name && !phase.done))).toBe(true);
    }
    // The heartbeats after the ready one (waited for, not slept for: a loaded machine may send the next late).
    await stream.until(() => stream.heartbeats.length > stream.heartbeats.indexOf(ready) + 1, 10_000);
    const after = stream.heartbeats.slice(stream.heartbeats.indexOf(ready) + 1);
    expect(after.length).toBeGreaterThan(0);
    expect(after.every((heartbeat) => heartbeat.startupPhases.length === 0)).toBe(true);
  });
});

describe('the openai engine: load until the engine first answers, then a one-token warm-up before it is ready', () => {
  interface FakeVllm { url: string; answering: boolean; completions: Array<Record<string, unknown>>; completionStatus: number; release: () => void }

  /** An engine whose /v1/models fails until `answering`, and whose completions wait for `release()`. */
  async function fakeVllm(): Promise<FakeVllm> {
    let releaseNow: () => void = () => {};
    let released = new Promise<void>((resolve) => { releaseNow = resolve; });
    const state: FakeVllm = { url: '', answering: false, completions: [], completionStatus: 200, release: () => releaseNow() };
    const server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk) => chunks.push(chunk));
      request.on('end', () => {
        if (request.url === '/v1/models') {
          response.writeHead(state.answering ? 200 : 503, { 'content-type': 'application/json' });
          response.end(JSON.stringify(state.answering ? { data: [{ id: 'served-model', owned_by: 'vllm' }] } : { error: 'loading' }));
          return;
        }
        state.completions.push(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        void released.then(() => {
          response.writeHead(state.completionStatus, { 'content-type': 'application/json' });
          response.end(JSON.stringify({ choices: [{ text: ' world' }] }));
        });
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    disposables.push(async () => {
      releaseNow();
      released = Promise.resolve();
      server.closeAllConnections();
      server.close();
    });
    return state;
  }

  test('a loading engine keeps the load phase running; its first answer ends it, and the replica is ready only after the warm-up', async () => {
    const vllm = await fakeVllm();
    const phases = new StartupPhases();
    const engine = new OpenAiEngine({ url: vllm.url, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 50, warmUp: true, metricsPath: null });
    disposables.push(() => engine.close());
    await engine.start(undefined, phases);
    expect(phases.current).toBe('load');
    expect(engine.health().status).toBe('ENGINE_HEALTH_UNHEALTHY');
    vllm.answering = true;
    const until = async (probe: () => boolean) => {
      for (let tries = 0; tries < 200 && !probe(); tries += 1) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(probe()).toBe(true);
    };
    await until(() => vllm.completions.length === 1);
    expect(vllm.completions[0]).toEqual({ model: 'served-model', prompt: 'Hello', max_tokens: 1 });
    expect(phases.frames().map((phase) => [phase.name, phase.done])).toEqual([['load', true], ['warm_up', false]]);
    expect(phases.frames()[0].detail).toBe('the engine answered GET /v1/models (1 model(s))');
    // Answering, but not ready: no work before the warm-up is over.
    expect(engine.health()).toEqual({ status: 'ENGINE_HEALTH_STARTING', detail: 'warming up the engine: 99 %', loadPercent: 99 });
    vllm.release();
    await until(() => engine.health().status === 'ENGINE_HEALTH_HEALTHY');
    expect(phases.frames()[1]).toMatchObject({ name: 'warm_up', done: true, detail: '1 token completed' });
    // Later probes change nothing: one warm-up per start.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(vllm.completions).toHaveLength(1);
  });

  test('an engine that refuses the completion (an embedding model) is ready all the same; the phase says so', async () => {
    const vllm = await fakeVllm();
    vllm.answering = true;
    vllm.completionStatus = 400;
    vllm.release();
    const phases = new StartupPhases();
    const engine = new OpenAiEngine({ url: vllm.url, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, warmUp: true, engineModel: 'embedder', metricsPath: null });
    disposables.push(() => engine.close());
    await engine.start(undefined, phases);
    expect(engine.health().status).toBe('ENGINE_HEALTH_HEALTHY');
    expect(vllm.completions[0]).toMatchObject({ model: 'embedder' });
    expect(phases.frames().map((phase) => [phase.name, phase.done, phase.detail])).toEqual([
      ['load', true, 'the engine answered GET /v1/models (1 model(s))'], ['warm_up', true, 'skipped: the engine answered 400 to a completion'],
    ]);
  });

  test('without warm-up (the default), the engine is ready on its first answer and is sent nothing else', async () => {
    const vllm = await fakeVllm();
    vllm.answering = true;
    const phases = new StartupPhases();
    const engine = new OpenAiEngine({ url: vllm.url, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, metricsPath: null });
    disposables.push(() => engine.close());
    await engine.start(undefined, phases);
    expect(engine.health().status).toBe('ENGINE_HEALTH_HEALTHY');
    expect(phases.frames().map((phase) => phase.name)).toEqual(['load']);
    expect(vllm.completions).toHaveLength(0);
  });
});
