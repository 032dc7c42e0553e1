/**
 * Issue 19, part 3: clients that open a long stream and never read it. 30 raw sockets send
 * `stream: true, n: 16, max_tokens: 65536` (the CPU engine's largest answer), see the status
 * line and read nothing more. Meanwhile another client's ordinary chats must stay fast, the
 * gateway (this process) and the agent (its child process) may hold only a bounded amount per
 * stalled request, and the stalled requests must end once STREAM_STALL_TIMEOUT_MS passes with
 * no byte taken: canceled on the engine, metered, their sockets closed.
 */
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { rssBytes } from '../../bench/processes';
import { UsageRecord } from '../../control-plane/usage/usage-record.entity';
import { startWithDeployment, waitFor, type TestServer, type TestWorkspace } from '../support/test-server';

const STALLED_CLIENTS = 30;
/**
 * Long enough that a chat held behind the stalled streams (until they end) is told apart from a
 * chat that was merely slow on a loaded CI machine (once 2.3 s beside the whole suite).
 */
const STALL_TIMEOUT_MS = 6_000;
/**
 * Before the timeout runs, the windows fill and the sockets' kernel buffers keep taking bytes
 * for a few seconds after the first refused write (each of those is progress): ~2.5 s here
 * alone, 10.9 s once in CI beside the whole suite (a first round on a cold, loaded 2-core
 * machine). Without flow control they never ended, so the bound only has to be finite.
 */
const END_SLACK_MS = 30_000;
const MIB = 1024 * 1024;
const STALLED_BODY = JSON.stringify({ messages: [{ role: 'user', content: 'tell me everything' }], stream: true, n: 16, max_tokens: 65_536 });

interface UnreadStream {
  readonly socket: net.Socket;
  readonly head: string;
}

/** A client that sends its request, waits for the first bytes of the answer, then reads nothing more. */
function openUnreadStream(baseUrl: string, apiKey: string): Promise<UnreadStream> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`POST ${url.pathname}/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${apiKey}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(STALLED_BODY)}\r\n\r\n${STALLED_BODY}`);
    });
    socket.once('error', reject);
    socket.once('data', (data) => {
      socket.pause();
      resolve({ socket, head: data.toString('latin1', 0, 100) });
    });
  });
}

/** Reads what the socket still holds until the server's close arrives; resolves with the last bytes. */
function readToClose(socket: net.Socket, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let tail = '';
    const timer = setTimeout(() => reject(new Error('the server kept a stalled stream open')), timeoutMs);
    socket.on('data', (data: Buffer) => (tail = (tail + data.toString('latin1')).slice(-200)));
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(tail);
    });
    socket.on('error', () => undefined);
    socket.resume();
  });
}

/** A full collection in this process (jest runs without --expose-gc). */
function collectGarbage(): void {
  v8.setFlagsFromString('--expose-gc');
  (vm.runInNewContext('gc') as () => void)();
}

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));
const percentile = (values: number[], fraction: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(values.length * fraction))];

describe('clients that never read their stream', () => {
  let test: TestServer;
  let workspace: TestWorkspace;
  let deployment: { id: string; baseUrl: string };

  beforeAll(async () => {
    ({ test, workspace, deployment } = await startWithDeployment({
      gateway: { streamStallTimeoutMs: STALL_TIMEOUT_MS }, limits: { tpdLimit: 1_000_000_000, rpmLimit: 100_000 },
    }));
  });

  afterAll(async () => {
    await test?.stop();
  });

  it('holds a bounded amount per stalled request, keeps other chats fast, and ends the stalled ones after the stall timeout', async () => {
    const { controlPlane } = test.server;
    const connection = controlPlane.dispatcher.connections(deployment.id)[0];
    const agentPid = controlPlane.localProvider!.processOf(connection.replicaId)!.pid!;
    const records = controlPlane.dataSource.getRepository(UsageRecord);
    const streamRecords = () => records.find({ where: { apiKeyId: workspace.apiKeyId, stream: true }, order: { createdAt: 'ASC' } });
    const chat = async () => {
      const startedAt = performance.now();
      const response = await fetch(`${deployment.baseUrl}/chat/completions`, {
        method: 'POST', headers: { authorization: `Bearer ${workspace.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'are you there?' }], max_tokens: 16 }),
      });
      const answer = await response.json();
      expect({ status: response.status, error: answer.error }).toEqual({ status: 200, error: undefined });
      expect(answer.choices[0].message.content.length).toBeGreaterThan(0);
      return performance.now() - startedAt;
    };
    const peaks = { gateway: 0, agent: 0 };
    /** The peaks of the measured (second) round alone, from its warmed start. */
    const measuredPeaks = { gateway: 0, agent: 0 };
    const samplePeaks = () => {
      const gateway = process.memoryUsage().rss;
      const agent = rssBytes(agentPid);
      peaks.gateway = Math.max(peaks.gateway, gateway);
      peaks.agent = Math.max(peaks.agent, agent);
      measuredPeaks.gateway = Math.max(measuredPeaks.gateway, gateway);
      measuredPeaks.agent = Math.max(measuredPeaks.agent, agent);
    };

    /** 30 unread streams, the other client's chats while they are held, until all 30 are metered as canceled. */
    const round = async () => {
      const endedBefore = (await streamRecords()).length;
      const stalled = await Promise.all(Array.from({ length: STALLED_CLIENTS }, () => openUnreadStream(deployment.baseUrl, workspace.apiKey)));
      const openedAt = performance.now();
      expect(stalled.map(({ head }) => head.slice(0, 12))).toEqual(Array(STALLED_CLIENTS).fill('HTTP/1.1 200'));
      const latencies: number[] = [];
      let endedAfterMs = 0;
      while (!endedAfterMs) {
        latencies.push(await chat());
        samplePeaks();
        if ((await streamRecords()).length >= endedBefore + STALLED_CLIENTS) endedAfterMs = performance.now() - openedAt;
        else if (performance.now() - openedAt > 2 * (STALL_TIMEOUT_MS + END_SLACK_MS)) throw new Error('the stalled streams were not ended');
        await sleep(50);
      }
      const ended = (await streamRecords()).slice(endedBefore);
      return { stalled, latencies, endedAfterMs, ended };
    };
    /** The server closed every stalled socket, mid-stream: its buffered bytes end without [DONE]. */
    const expectClosedMidStream = async (stalled: UnreadStream[]) => {
      const tails = await Promise.all(stalled.map(({ socket }) => readToClose(socket, 20_000)));
      expect(tails.filter((tail) => tail.includes('[DONE]'))).toEqual([]);
    };

    for (let warmup = 0; warmup < 20; warmup++) await chat();
    collectGarbage();
    const coldStart = { gateway: process.memoryUsage().rss, agent: rssBytes(agentPid) };

    // A first round warms both processes up: a burst like this grows V8's young generation to
    // its maximum and leaves freed buffers in malloc's arenas, pages neither gives back to the
    // system for a long while. RSS after it is the steady state of a process that has served
    // such a burst; memory a stalled request kept would come on top of it in the second round.
    const warmup = await round();
    expect(warmup.endedAfterMs).toBeLessThan(STALL_TIMEOUT_MS + END_SLACK_MS);
    await expectClosedMidStream(warmup.stalled);
    collectGarbage();
    await sleep(500);
    const start = { gateway: process.memoryUsage().rss, agent: rssBytes(agentPid) };
    Object.assign(measuredPeaks, start);

    const measured = await round();
    collectGarbage();
    const ends: Array<{ gateway: number; agent: number }> = [];
    for (let sample = 0; sample < 6; sample++) {
      await sleep(500);
      ends.push({ gateway: process.memoryUsage().rss, agent: rssBytes(agentPid) });
    }
    const end = { gateway: Math.min(...ends.map((sample) => sample.gateway)), agent: Math.min(...ends.map((sample) => sample.agent)) };
    await expectClosedMidStream(measured.stalled);

    const latencies = [...warmup.latencies, ...measured.latencies];
    // SLOW_CLIENTS_REPORT=1 prints the figures behind the assertions; a full-size run is in bench/results/2026-11-26-slow-clients.md.
    if (process.env.SLOW_CLIENTS_REPORT) {
      process.stdout.write(`${JSON.stringify({
        endedAfterMs: [warmup.endedAfterMs, measured.endedAfterMs].map(Math.round), chats: latencies.length,
        p50: percentile(latencies, 0.5), p99: percentile(latencies, 0.99), max: Math.max(...latencies),
        gatewayMiB: { coldStart: coldStart.gateway / MIB, start: start.gateway / MIB, peak: peaks.gateway / MIB, end: end.gateway / MIB },
        agentMiB: { coldStart: coldStart.agent / MIB, start: start.agent / MIB, peak: peaks.agent / MIB, end: end.agent / MIB },
      })}\n`);
    }

    // Every stalled request was canceled on the engine (nothing left in flight) and metered
    // for what it produced, as a disconnect is; the next chat found the agent free.
    for (const ended of [warmup.ended, measured.ended]) {
      expect(ended.map((record) => record.status)).toEqual(Array(STALLED_CLIENTS).fill('canceled'));
      expect(ended.every((record) => record.completionTokens > 0 && record.completionTokens < 16 * 65_536)).toBe(true);
    }
    expect(connection.inFlight).toBe(0);
    await waitFor(() => connection.heartbeat?.inFlight === 0 && connection.heartbeat.queued === 0, 5_000, 'the agent reports no job left');

    expect(measured.endedAfterMs).toBeLessThan(STALL_TIMEOUT_MS + END_SLACK_MS);
    // Other chats kept a normal latency (~5 ms at the median here; the slowest come while the
    // 30 streams fill their buffers). Without flow control the agent went silent and they failed
    // (502, then 503), or at full size took 250 ms at the median and up to 1.8 s. None waited
    // for the stalled streams to end (that takes STALL_TIMEOUT_MS): a chat held behind them would
    // take 6 s or more; the slowest of one round was 2.3 s once in CI and 3.4 s once beside the
    // fuzz suite on a loaded 2-core machine, so the bound is three quarters of the timeout.
    expect(percentile(latencies, 0.5)).toBeLessThan(100);
    expect(Math.max(...latencies)).toBeLessThan(STALL_TIMEOUT_MS * 0.75);
    // Bounded: 30 stalled requests may hold a window (1 MiB) each in the gateway, and the agent
    // only what is in flight: issue 19's 150 MiB, for the measured round over its warmed start.
    expect(measuredPeaks.gateway - start.gateway).toBeLessThan(150 * MIB);
    expect(measuredPeaks.agent - start.agent).toBeLessThan(150 * MIB);
    // From the cold start, the first round's warm-up comes on top: on Node 24 the same code
    // (f8e0f23, measured 2026-11-29) grows by +133-162 MiB (gateway) and +154-210 MiB (agent) over
    // both rounds, +52 and +101 MiB on Node 20; runtime and allocator pages, not what a stalled
    // request keeps (the second round adds 3-30 MiB). Before flow control the agent reached +1.3 GiB.
    expect(peaks.gateway - coldStart.gateway).toBeLessThan(300 * MIB);
    expect(peaks.agent - coldStart.agent).toBeLessThan(300 * MIB);
    expect(end.gateway).toBeLessThan(start.gateway * 1.2);
    // The agent is a child process this test cannot ask for a full collection, so its RSS still
    // carries garbage and malloc's arenas (+39 MiB over the warmed start once beside the whole
    // suite on Node 20, +83 MiB on Node 24): the bound is absolute. Kept stalled requests are far
    // more: before flow control the agent ended at 1.36 GiB (bench/results/2026-11-26-slow-clients.md).
    expect(end.agent - start.agent).toBeLessThan(128 * MIB);
  }, 4 * (STALL_TIMEOUT_MS + END_SLACK_MS) + 30_000);
});
