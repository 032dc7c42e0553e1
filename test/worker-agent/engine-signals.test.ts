import fs from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { AgentSession } from '../../worker-agent/agent-session';
import { CpuEngine } from '../../worker-agent/engines/cpu-engine';
import type { Engine, EngineSink } from '../../worker-agent/engines/engine';
import type { EngineSignals, EngineSignalsAnswer } from '../../worker-agent/engines/engine-signals';
import { LoadingEngine } from '../../worker-agent/engines/loading-engine';
import { OpenAiEngine } from '../../worker-agent/engines/openai-engine';
import { JobCancellation } from '../../worker-agent/job-cancellation';
import { engineJob } from './support/engine-harness';
import { FakeControlPlane, welcomeFrame } from './support/fake-control-plane';

const FIXTURES = path.join(__dirname, '../fixtures/engine-metrics');
const fixture = (name: string) => fs.readFileSync(path.join(FIXTURES, name), 'utf8');

const disposables: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  for (const dispose of disposables.splice(0).reverse()) await dispose();
});

/** An HTTP engine that answers /v1/models and serves `page()` on its metrics path. */
async function metricsEngineServer(page: () => { status?: number; body: string; delayMs?: number }) {
  const scrapes: http.IncomingHttpHeaders[] = [];
  const paths: string[] = [];
  const server = http.createServer((request, response) => {
    paths.push(request.url ?? '');
    if (request.url === '/v1/models') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ id: 'served' }] }));
      return;
    }
    scrapes.push(request.headers);
    const { status = 200, body, delayMs = 0 } = page();
    setTimeout(() => {
      if (!response.destroyed) response.writeHead(status, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(body);
    }, delayMs);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  disposables.push(() => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, scrapes, paths };
}

function openAi(url: string, options: Partial<ConstructorParameters<typeof OpenAiEngine>[0]> = {}): OpenAiEngine {
  const engine = new OpenAiEngine({ url, connections: 2, connectTimeoutMs: 1_000, healthIntervalMs: 60_000, ...options });
  disposables.push(() => engine.close());
  return engine;
}

describe('OpenAiEngine.signals', () => {
  test('scrapes /metrics beside /v1 and works the hit rate out over the interval between scrapes', async () => {
    const pages = [fixture('vllm-0.10-text-scrape-1.prom'), fixture('vllm-0.10-text-scrape-2.prom')];
    const engine = await metricsEngineServer(() => ({ body: pages.shift() ?? '' }));
    const openai = openAi(`${engine.url}/v1`);
    expect(await openai.signals()).toEqual({ running: 12, waiting: 0, kvCacheUsage: 0.41274189239359155, prefixCacheHitRate: null });
    const second = await openai.signals();
    expect(second).toMatchObject({ running: 31, waiting: 7 });
    expect(second!.prefixCacheHitRate).toBeCloseTo(88_128 / 113_664, 12);
    expect(engine.paths).toEqual(['/metrics', '/metrics']);
    // The text format, not OpenMetrics (both parse; this one is smaller).
    expect(engine.scrapes[0].accept).toMatch(/^text\/plain;version=0\.0\.4/);
  });

  test('reads OpenMetrics too, on a configured path under the engine\'s base path', async () => {
    const engine = await metricsEngineServer(() => ({ body: fixture('vllm-0.11-dp2-openmetrics.txt') }));
    const openai = openAi(`${engine.url}/engine-a/v1`, { metricsPath: '/stats/prometheus' });
    expect(await openai.signals()).toMatchObject({ running: 46, waiting: 3, prefixCacheHitRate: null });
    expect(engine.paths).toEqual(['/engine-a/stats/prometheus']);
  });

  test('one scrape at a time: calls while one runs share it', async () => {
    const engine = await metricsEngineServer(() => ({ body: fixture('sglang-0.4-text.prom'), delayMs: 50 }));
    const openai = openAi(engine.url);
    const [a, b] = await Promise.all([openai.signals(), openai.signals()]);
    expect(a).toBe(b);
    expect(a).toMatchObject({ running: 162, waiting: 2826, kvCacheUsage: 0.28 });
    expect(engine.scrapes).toHaveLength(1);
  });

  test.each([
    ['a 404 (metrics not enabled)', { status: 404, body: '{"detail":"Not Found"}' }],
    ['a page of other metrics', { body: 'process_open_fds 12\n' }],
    ['a scrape slower than its timeout', { body: fixture('sglang-0.4-text.prom'), delayMs: 1_000 }],
  ])('%s reads as no signals, not an error', async (_name, answer) => {
    const engine = await metricsEngineServer(() => answer);
    const openai = openAi(engine.url, { metricsTimeoutMs: 100 });
    await expect(openai.signals()).resolves.toBeNull();
  });

  test('an engine that cannot be reached reads as no signals', async () => {
    const openai = openAi('http://127.0.0.1:9', { connectTimeoutMs: 200 });
    await expect(openai.signals()).resolves.toBeNull();
  });

  test('metrics off: no scrape at all', async () => {
    const engine = await metricsEngineServer(() => ({ body: fixture('sglang-0.4-text.prom') }));
    const openai = openAi(engine.url, { metricsPath: null });
    expect(openai.signals()).toBeNull();
    expect(engine.scrapes).toHaveLength(0);
  });
});

describe('built-in engines report their own state', () => {
  test('the CPU engine counts its running calls; it has no queue of its own and no cache', async () => {
    const engine = new CpuEngine({ ttftMs: 0, tokensPerSecond: 50, testControls: false });
    expect(engine.signals()).toEqual({ running: 0, waiting: 0, kvCacheUsage: 0, prefixCacheHitRate: 0 });
    const sink: EngineSink = { chunk: () => undefined, output: () => undefined };
    const cancellation = new JobCancellation();
    const running = engine.run(engineJob({ messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 50 }), sink, cancellation).catch(() => undefined);
    expect(engine.signals().running).toBe(1);
    cancellation.abort(new Error('test over'));
    await running;
    expect(engine.signals().running).toBe(0);
  });

  test('the loading wrapper reports nothing until the engine is loaded, then forwards', async () => {
    const inner = new CpuEngine({ ttftMs: 0, tokensPerSecond: 0, testControls: false, loadMs: 40 });
    const loading = new LoadingEngine(inner);
    expect(loading.signals()).toBeNull();
    await loading.start();
    expect(loading.signals()).toEqual({ running: 0, waiting: 0, kvCacheUsage: 0, prefixCacheHitRate: 0 });
  });
});

/** A CPU engine whose signals the test sets; `fetched` answers them as a promise, like an HTTP engine. */
class SignalsEngine extends CpuEngine {
  current: EngineSignals | null = { running: 0, waiting: 0, kvCacheUsage: 0.2, prefixCacheHitRate: null };
  reads = 0;

  constructor(private readonly fetched = false) {
    super();
  }

  // Typed as the CPU engine's; with `fetched` it answers a promise, as the Engine interface allows.
  override signals(): EngineSignals {
    return this.answer() as EngineSignals;
  }

  private answer(): EngineSignalsAnswer {
    this.reads++;
    return this.fetched ? Promise.resolve(this.current) : this.current;
  }
}

async function session(engine: Engine, heartbeatIntervalMs: number) {
  const plane = await FakeControlPlane.start({ answerHello: () => welcomeFrame({ heartbeatIntervalMs }) });
  disposables.push(() => plane.close());
  const agent = new AgentSession({
    options: {
      controlPlaneAddress: plane.address, joinToken: 'jt', agentId: 'agt_signals', maxConcurrency: 4,
      reconnectInitialMs: 5, reconnectMaxMs: 20, drainTimeoutMs: 1_000, gpus: [],
    },
    engine, agentVersion: '9.9.9',
  });
  disposables.push(() => agent.stop('test over'));
  agent.start();
  return { stream: await plane.stream(0), agent };
}

describe('AgentSession sends engine signals', () => {
  test('every heartbeat carries them; a hit rate not known yet is marked so', async () => {
    const engine = new SignalsEngine();
    const { stream } = await session(engine, 200);
    const heartbeat = await stream.until(() => stream.heartbeats.find((beat) => beat.engineSignals));
    expect(heartbeat.engineSignals).toEqual({ running: 0, waiting: 0, kvCacheUsage: expect.closeTo(0.2, 6), prefixCacheHitRate: 0, prefixCacheHitRateKnown: false });
    engine.current = { running: 7, waiting: 0, kvCacheUsage: 0.5, prefixCacheHitRate: 0.75 };
    const later = await stream.until(() => stream.heartbeats.find((beat) => beat.engineSignals?.running === 7));
    expect(later.engineSignals).toEqual({ running: 7, waiting: 0, kvCacheUsage: 0.5, prefixCacheHitRate: 0.75, prefixCacheHitRateKnown: true });
  });

  test('an engine that reports none leaves the field unset (the control plane reads null)', async () => {
    const engine = new SignalsEngine();
    engine.current = null;
    const { stream } = await session(engine, 200);
    await stream.until(() => stream.heartbeats.length >= 2);
    expect(stream.heartbeats.every((beat) => beat.engineSignals === null)).toBe(true);
  });

  test('requests starting to wait, or the KV cache crossing 0.9 either way, send a heartbeat at once', async () => {
    const engine = new SignalsEngine();
    const { stream } = await session(engine, 60_000);
    await stream.until(() => stream.heartbeats.length === 1);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(stream.heartbeats).toHaveLength(1);

    // The interval is 60 s: a heartbeat within these waits (10 s, room for a loaded machine) is an early one.
    engine.current = { running: 4, waiting: 3, kvCacheUsage: 0.2, prefixCacheHitRate: null };
    expect((await stream.until(() => stream.heartbeats[1], 10_000)).engineSignals).toMatchObject({ waiting: 3 });

    // Still waiting, more running: no threshold crossed, nothing sent.
    engine.current = { running: 9, waiting: 5, kvCacheUsage: 0.6, prefixCacheHitRate: null };
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(stream.heartbeats).toHaveLength(2);

    engine.current = { running: 9, waiting: 5, kvCacheUsage: 0.93, prefixCacheHitRate: null };
    expect((await stream.until(() => stream.heartbeats[2], 10_000)).engineSignals?.kvCacheUsage).toBeCloseTo(0.93, 6);
    engine.current = { running: 2, waiting: 5, kvCacheUsage: 0.4, prefixCacheHitRate: null };
    expect((await stream.until(() => stream.heartbeats[3], 10_000)).engineSignals?.kvCacheUsage).toBeCloseTo(0.4, 6);
  });

  test('an early heartbeat follows the previous heartbeat by at least 250 ms', async () => {
    const engine = new SignalsEngine();
    const { stream, agent } = await session(engine, 60_000);
    await stream.until(() => stream.heartbeats.length === 1);
    const welcomedAt = Date.now();
    const arrivals: number[] = [];
    stream.call.on('data', (frame: { heartbeat?: unknown }) => { if (frame.heartbeat) arrivals.push(Date.now()); });
    // The agent re-reads the CPU-side signals every 250 ms from the Welcome on. A heartbeat sent
    // 80 ms after one of those reads, then a crossing, is seen by the next read 170 ms later:
    // too soon, so it waits until 250 ms after that heartbeat.
    await new Promise((resolve) => setTimeout(resolve, welcomedAt + 580 - Date.now()));
    // Measured from the send (heartbeatNow writes at once): an arrival can only be later than
    // its send, so a loaded machine cannot make the gap look shorter than it was.
    const sentAt = Date.now();
    agent.heartbeatNow();
    engine.current = { running: 1, waiting: 2, kvCacheUsage: 0.2, prefixCacheHitRate: null };
    await stream.until(() => stream.heartbeats[2], 2_000);
    expect(arrivals).toHaveLength(2);
    expect(stream.heartbeats[2].engineSignals).toMatchObject({ waiting: 2 });
    expect(arrivals[1] - sentAt).toBeGreaterThanOrEqual(245); // 250, less timer rounding
  });

  test('an openai engine\'s heartbeats carry what its /metrics says, the hit rate once two scrapes are in', async () => {
    const pages = [fixture('vllm-0.10-text-scrape-1.prom'), fixture('vllm-0.10-text-scrape-2.prom')];
    const server = await metricsEngineServer(() => ({ body: pages.length > 1 ? pages.shift()! : pages[0] }));
    const engine = openAi(server.url);
    await engine.start();
    const { stream } = await session(engine, 200);
    const first = await stream.until(() => stream.heartbeats.find((beat) => beat.engineSignals));
    expect(first.engineSignals).toEqual({
      running: 12, waiting: 0, kvCacheUsage: expect.closeTo(0.41274, 5), prefixCacheHitRate: 0, prefixCacheHitRateKnown: false,
    });
    const second = await stream.until(() => stream.heartbeats.find((beat) => beat.engineSignals?.running === 31));
    expect(second.engineSignals).toEqual({
      running: 31, waiting: 7, kvCacheUsage: expect.closeTo(0.93161, 5), prefixCacheHitRate: expect.closeTo(88_128 / 113_664, 5), prefixCacheHitRateKnown: true,
    });
  });

  test('signals the engine fetches (a promise) are read once per heartbeat, not polled', async () => {
    const engine = new SignalsEngine(true);
    engine.current = { running: 2, waiting: 1, kvCacheUsage: 0.3, prefixCacheHitRate: 0.5 };
    // A 3 s interval and a 1 s look: polled like the CPU-side signals (every 250 ms) it would be read
    // about four times, and a loaded machine cannot bring the next heartbeat's read into the look.
    const { stream } = await session(engine, 3_000);
    const first = await stream.until(() => stream.heartbeats[0]);
    // The heartbeat waited for the fetch: it carries this interval's signals, not none.
    expect(first.engineSignals).toMatchObject({ running: 2, waiting: 1, prefixCacheHitRate: 0.5, prefixCacheHitRateKnown: true });
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(engine.reads).toBe(1);
    await stream.until(() => stream.heartbeats[1], 10_000);
    expect(engine.reads).toBe(2);
  });
});
