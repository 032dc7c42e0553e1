/**
 * `npm run bench:slow-clients`: issue 19, part 3, at full size. One server process
 * (`dist/gateway/main.js`, embedded PostgreSQL in a temp dir, the first-run deployment on one
 * local agent with the CPU engine at full speed) with the default flow-control settings
 * (STREAM_STALL_TIMEOUT_MS 30 s, STREAM_BUFFER_BYTES 1 MiB). --connections raw sockets ask
 * `stream: true, n: 16, max_tokens: 65536`, see the first bytes of the answer and read nothing
 * more; meanwhile another key's client sends an ordinary chat (16 tokens, not streamed) every
 * --chat-interval-ms. Recorded: the RSS of the server (gateway and control plane) and of the
 * agent before, at their peak and after the stalled requests ended; the other client's latency
 * while they were held; when the server ended them and whether it closed their sockets.
 *
 * A control phase follows (or, with --control-first, comes first): the same number of the same
 * streams, read at full speed and closed after --control-mib each (about what a stalled one is
 * sent before it stalls), so the RSS a burst of that volume leaves behind can be told from what
 * slow clients leave.
 *
 * Flags: --connections 30 --chat-interval-ms 200 --settle-seconds 10 --control-mib 4 --control-first
 *        --max-hold-seconds 120 (a server that never ends the stalled streams, e.g. one older than
 *        flow control: the clients close them then) --out FILE (the JSON summary)
 * Rate limits of the first-run key are raised (DEFAULT_RPM_LIMIT, DEFAULT_TPD_LIMIT) so that they play no part.
 * Both processes run with an inspector on a loopback port (idle until used): after each phase
 * a full collection is asked of each (`HeapProfiler.collectGarbage`), so RSS is reported as it
 * was and once garbage is gone, which tells memory still held from pages not yet collected.
 */
import fs from 'node:fs';
import net from 'node:net';
import { parseArgs } from 'node:util';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { commandOf, descendants, rssBytes } from './processes';
import WebSocket from 'ws';
import { ServerProcess, until } from './server-process';
import { freePort } from './targets';

const MIB = 1024 * 1024;
const STALLED_BODY = JSON.stringify({ messages: [{ role: 'user', content: 'tell me everything' }], stream: true, n: 16, max_tokens: 65_536 });
const CHAT_BODY = JSON.stringify({ messages: [{ role: 'user', content: 'are you there?' }], max_tokens: 16 });

interface RssSeries {
  /** Just before the phase, after a full garbage collection. */
  start: number;
  peak: number;
  /** --settle-seconds after the streams ended. */
  end: number;
  /** Then, a second after a full garbage collection. */
  endAfterGc: number;
}

class RssWatch {
  private readonly samples = new Map<string, number[]>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly pids: Record<string, number[]>) {}

  start(intervalMs = 250): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /** Samples taken since `from` (an index from `mark`). */
  mark(): number {
    return this.samples.get(Object.keys(this.pids)[0])?.length ?? 0;
  }

  series(role: string, from: number, to = Infinity): number[] {
    return (this.samples.get(role) ?? []).slice(from, to);
  }

  private sample(): void {
    for (const [role, pids] of Object.entries(this.pids)) {
      const list = this.samples.get(role) ?? [];
      list.push(pids.reduce((sum, pid) => sum + rssBytes(pid), 0));
      this.samples.set(role, list);
    }
  }
}

interface OpenStream {
  readonly socket: net.Socket;
  readonly head: string;
  received(): number;
  /** An unread stream reads again: resolves with its last bytes once the server closed it, or '(still open)'. */
  readRest(timeoutMs: number): Promise<string>;
}

/** Sends the request and resolves at the first bytes of the answer; `read` false pauses the socket there until `readRest`. */
function openStream(url: URL, key: string, read: boolean, stopAfterBytes = Infinity): Promise<OpenStream> {
  return new Promise((resolve, reject) => {
    let received = 0;
    let held = !read;
    let tail = '';
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(`POST ${url.pathname} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${key}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(STALLED_BODY)}\r\n\r\n${STALLED_BODY}`);
    });
    socket.once('error', reject);
    const readRest = (timeoutMs: number) => new Promise<string>((done) => {
      const timer = setTimeout(() => { socket.destroy(); done('(still open)'); }, timeoutMs);
      socket.once('close', () => { clearTimeout(timer); done(tail); });
      socket.on('error', () => undefined);
      held = false;
      socket.resume();
    });
    socket.on('data', (data: Buffer) => {
      if (received === 0) resolve({ socket, head: data.toString('latin1', 0, 12), received: () => received, readRest });
      received += data.length;
      tail = (tail + data.toString('latin1')).slice(-100);
      if (held) socket.pause();
      else if (received >= stopAfterBytes) socket.destroy();
    });
  });
}

async function chat(url: URL, key: string): Promise<{ ms: number; status: number }> {
  const startedAt = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: CHAT_BODY });
  await response.arrayBuffer();
  return { ms: performance.now() - startedAt, status: response.status };
}

async function graphql(baseUrl: string, key: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const response = await fetch(`${baseUrl}/graphql`, {
    method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: any; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

/** Jobs on the server's agents now (`inference_in_flight`, every class). */
async function inFlight(baseUrl: string): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  return text.split('\n').filter((line) => line.startsWith('inference_in_flight{')).reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

/** One inspector call in the process whose inspector listens on `port`; its result. */
async function inspectorCall(port: number, method: string, params: Record<string, unknown> = {}): Promise<any> {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as Array<{ webSocketDebuggerUrl: string }>;
  const socket = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { socket.once('open', resolve); socket.once('error', reject); });
  const result = await new Promise<any>((resolve) => {
    socket.on('message', (message) => {
      const answer = JSON.parse(message.toString()) as { id?: number; result?: unknown };
      if (answer.id === 1) resolve(answer.result);
    });
    socket.send(JSON.stringify({ id: 1, method, params }));
  });
  socket.close();
  return result;
}

/** A full garbage collection, then what V8 still holds: its heap in use and the memory outside it (Buffers), in MiB. */
async function collectGarbage(port: number): Promise<{ heapUsedMiB: number; externalMiB: number }> {
  await inspectorCall(port, 'HeapProfiler.collectGarbage');
  const answer = await inspectorCall(port, 'Runtime.evaluate', { expression: 'JSON.stringify(process.memoryUsage())', returnByValue: true });
  const usage = JSON.parse(answer.result.value as string) as NodeJS.MemoryUsage;
  return { heapUsedMiB: mib(usage.heapUsed), externalMiB: mib(usage.external) };
}

/** A full collection in both processes, with what each still holds. */
async function collectBoth(ports: { server: number; agent: number }): Promise<Record<string, { heapUsedMiB: number; externalMiB: number }>> {
  const [server, agent] = await Promise.all([collectGarbage(ports.server), collectGarbage(ports.agent)]);
  return { server, agent };
}

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, milliseconds));
const mib = (bytes: number) => Math.round((bytes / MIB) * 10) / 10;
const round = (value: number) => Math.round(value * 10) / 10;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: {
    connections: { type: 'string', default: '30' }, 'chat-interval-ms': { type: 'string', default: '200' },
    'settle-seconds': { type: 'string', default: '10' }, 'control-mib': { type: 'string', default: '4' },
    'control-first': { type: 'boolean', default: false }, 'max-hold-seconds': { type: 'string', default: '120' }, out: { type: 'string' },
  } });
  const maxHoldMs = Number(values['max-hold-seconds']) * 1000;
  const connections = Number(values.connections);
  const chatIntervalMs = Number(values['chat-interval-ms']);
  const settleMs = Number(values['settle-seconds']) * 1000;

  const inspectorPorts = { server: await freePort(), agent: await freePort() };
  process.env.BENCH_SERVER_NODE_ARGS = `${process.env.BENCH_SERVER_NODE_ARGS ?? ''} --inspect=127.0.0.1:${inspectorPorts.server}`;
  const server = await ServerProcess.start({ name: 'bench-slow-clients', env: {
    DEFAULT_RPM_LIMIT: '1000000', DEFAULT_TPD_LIMIT: '1000000000000', LOCAL_AGENT_NODE_ARGS: `--inspect=127.0.0.1:${inspectorPorts.agent}`,
  } });
  try {
    const [deployment] = (await graphql(server.baseUrl, server.key, '{ deployments { id slug } }')).deployments as Array<{ id: string; slug: string }>;
    const chatUrl = new URL(`${server.baseUrl}/d/${deployment.slug}/v1/chat/completions`);
    const other = (await graphql(server.baseUrl, server.key, 'mutation { createApiKey(input: {name: "other client"}) { plaintext } }')).createApiKey.plaintext as string;
    await until(async () => (await chat(chatUrl, other)).status === 200, 120_000, 'the deployment answering');
    const agents = descendants(server.pid).filter((pid) => commandOf(pid).includes('worker-agent/main.js'));
    if (agents.length === 0) throw new Error('no local agent found under the server');
    const watch = new RssWatch({ server: [server.pid], agent: agents });
    for (let warmup = 0; warmup < 50; warmup++) await chat(chatUrl, other);
    watch.start();
    await sleep(2_000);

    const phase = async (name: string, read: boolean, stopAfterBytes?: number) => {
      const liveAtStart = await collectBoth(inspectorPorts);
      await sleep(500);
      const before = watch.mark();
      await sleep(1_000);
      const startMark = watch.mark();
      const streams = await Promise.all(Array.from({ length: connections }, () => openStream(chatUrl, server.key, read, stopAfterBytes)));
      const openedAt = performance.now();
      const latencies: number[] = [];
      const failures: number[] = [];
      let endedAfterMs = 0;
      let heldAfterMs = 0;
      while (!endedAfterMs && !heldAfterMs) {
        const started = performance.now();
        const result = await chat(chatUrl, other);
        latencies.push(result.ms);
        if (result.status !== 200) failures.push(result.status);
        if (performance.now() - openedAt > 1_000 && (await inFlight(server.baseUrl).catch(() => -1)) === 0) endedAfterMs = performance.now() - openedAt;
        else if (performance.now() - openedAt > maxHoldMs) heldAfterMs = performance.now() - openedAt;
        await sleep(Math.max(0, chatIntervalMs - (performance.now() - started)));
      }
      if (heldAfterMs) {
        for (const { socket } of streams) socket.destroy();
        await until(async () => (await inFlight(server.baseUrl)) === 0, 60_000, 'the streams the clients closed to end');
      }
      const endedMark = watch.mark();
      await sleep(settleMs);
      const settledMark = watch.mark();
      const liveAtEnd = await collectBoth(inspectorPorts);
      await sleep(1_000);
      const collectedMark = watch.mark();
      // The server closed the stalled sockets mid-stream: what they still hold ends without [DONE].
      let closedMidStream = 0;
      if (!read && endedAfterMs) {
        const tails = await Promise.all(streams.map((stream) => stream.readRest(30_000)));
        closedMidStream = tails.filter((tail) => tail !== '(still open)' && !tail.includes('[DONE]')).length;
      }
      const series = (role: string): RssSeries => ({
        start: percentile([...watch.series(role, before, startMark)].sort((a, b) => a - b), 0.5),
        peak: Math.max(...watch.series(role, startMark, settledMark)),
        end: watch.series(role, endedMark, settledMark).at(-1)!,
        endAfterGc: watch.series(role, settledMark, collectedMark + 1).at(-1)!,
      });
      const sorted = [...latencies].sort((a, b) => a - b);
      return {
        phase: name, connections, statuses: [...new Set(streams.map(({ head }) => head))],
        bytesPerStreamMiB: mib(streams.reduce((sum, stream) => sum + stream.received(), 0) / connections),
        endedAfterSeconds: endedAfterMs ? round(endedAfterMs / 1000) : `not ended by the server; the clients closed them after ${round(heldAfterMs / 1000)} s`,
        closedMidStream,
        otherClient: { chats: latencies.length, failed: failures.length, p50Ms: round(percentile(sorted, 0.5)), p99Ms: round(percentile(sorted, 0.99)), maxMs: round(sorted.at(-1)!) },
        rssMiB: Object.fromEntries(['server', 'agent'].map((role) => {
          const { start, peak, end, endAfterGc } = series(role);
          return [role, { start: mib(start), peak: mib(peak), end: mib(end), endAfterGc: mib(endAfterGc) }];
        })),
        // What the JavaScript side still holds after a full collection, before and after the phase.
        liveAfterGc: { start: liveAtStart, end: liveAtEnd },
      };
    };

    const stalledPhase = () => phase(`stalled: ${connections} streams never read`, false);
    const controlPhase = () => phase(`control: the same streams read at full speed, closed after ${values['control-mib']} MiB`, true, Number(values['control-mib']) * MIB);
    const results = values['control-first'] ? [await controlPhase(), await stalledPhase()] : [await stalledPhase(), await controlPhase()];
    watch.stop();
    const summary = { machine: describeMachine(), settings: 'defaults (STREAM_STALL_TIMEOUT_MS 30000, STREAM_BUFFER_BYTES 1048576)', results };
    process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
    if (values.out) fs.writeFileSync(values.out, `${JSON.stringify(summary, null, 2)}\n`);
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
