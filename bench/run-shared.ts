/**
 * `npm run bench:shared`: does a guest flood on shared serving cost the owner anything?
 * One server process (`dist/gateway/main.js`, embedded PostgreSQL in a temp dir, bound to
 * 127.0.0.1) whose local agents run the CPU engine with real time per token
 * (WORKER_CPU_TTFT_MS / WORKER_CPU_TOKENS_PER_SECOND). The first-run deployment becomes the
 * owner's: --replicas replicas × --slots slots, shareIdleCapacity on (rolling restart to
 * `shared`). A guest workspace is made with the operator API (prepaid credit). This process is
 * only the owner's client, the guests' client is a forked process of its own; the clients' CPU
 * and event-loop delay are recorded next to the server's.
 *
 * Phases, interleaved (A, B, A, B, …), each on the same replicas:
 * - A: the owner alone, a closed loop of --owner-concurrency streamed chats on its endpoint;
 * - B: the same owner load plus --guest-multiplier × the pool's idle guest slots (read from
 *   GraphQL `sharedModels` with the owner load running) guests in a closed loop on
 *   /shared/v1/chat/completions; a 429 waits --guest-backoff-ms (not Retry-After, so the
 *   flood stays a flood).
 * Target: the owner's TTFT p99 in B at most 10 % above A (medians over repetitions).
 *
 * Flags: --seconds 30 --warmup 5 --reps 3 --replicas 2 --slots 8 --ttft-ms 40
 *        --tokens-per-second 50 --max-tokens 32 --owner-concurrency (half the slots)
 *        --owner-think-ms 10 (random 0–N ms between an owner loop's requests; the loops also start staggered)
 *        --guest-multiplier 5 --guest-backoff-ms 50 --database-url URL
 *        --profile-dir DIR (--cpu-prof of the server and its agents, written at exit)
 * Env BENCH_SHARED_SECONDS / BENCH_SHARED_WARMUP / BENCH_SHARED_REPS override the defaults.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { commandOf, cpuMicros, descendants, stopServerTree } from './processes';
import { median } from './report';
import { until } from './server-process';
import { freePort, PROJECT_ROOT } from './targets';

const MODEL = 'meta-llama/Llama-3.1-8B-Instruct';
const SHARED_ID = `shared/${MODEL}`;
const OPERATOR_TOKEN = `bench-operator-${Math.random().toString(36).slice(2)}-${Date.now()}`;
/** Owner load runs this long before the idle slots are read (every phase, A too, so they match). */
const SETTLE_MS = 2_000;

interface Options {
  seconds: number; warmup: number; reps: number; replicas: number; slots: number; ttftMs: number; tokensPerSecond: number;
  maxTokens: number; ownerConcurrency: number; ownerThinkMs: number; guestMultiplier: number; guestBackoffMs: number; headroomFraction: number; maxGuestsPerReplica: number;
}

interface Sample {
  readonly startedAt: number;
  /** First SSE chunk with non-empty content (the role chunk before it does not count). */
  readonly firstTokenAt: number | null;
  readonly endedAt: number;
  readonly status: number;
  readonly tokens: number;
  readonly error?: string;
}

// ---------------------------------------------------------------------------------------------
// The server process: detached in its own process group (as `npm start`'s launcher does), so a
// terminal Ctrl-C reaches only this process, which then stops the server in order; whatever is
// left of the group (agents, PostgreSQL) is killed after a timeout.

class BenchServer {
  private constructor(readonly child: ChildProcess, readonly dataDir: string, readonly baseUrl: string, readonly key: string, readonly output: () => string) {}

  static async start(env: Record<string, string>, databaseUrl: string | undefined, nodeArgs: string[]): Promise<BenchServer> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-shared-'));
    fs.chmodSync(dataDir, 0o755);
    const port = await freePort();
    const child = spawn(process.execPath, [...nodeArgs, path.join(PROJECT_ROOT, 'dist/gateway/main.js')], {
      env: {
        PATH: process.env.PATH, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`,
        GRPC_PORT: '0', GRPC_HOST: '127.0.0.1', LOG_LEVEL: 'warn',
        ...(databaseUrl ? { DATABASE_URL: databaseUrl } : { EMBEDDED_DATABASE_PORT: String(await freePort()) }),
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'], detached: true,
    });
    let output = '';
    child.stdout!.on('data', (part) => (output += part));
    child.stderr!.on('data', (part) => (output += part));
    const server = new BenchServer(child, dataDir, `http://127.0.0.1:${port}`, '', () => output);
    running = server;
    await until(() => /API key:\s+mk-/.test(output) || child.exitCode !== null, 120_000, 'the server banner');
    if (child.exitCode !== null) throw new Error(`server exited: ${output.slice(-2000)}`);
    const key = /API key:\s+(mk-\S+)/.exec(output)![1];
    const started = new BenchServer(child, dataDir, server.baseUrl, key, () => output);
    running = started;
    return started;
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** SIGINT (drains agents, stops PostgreSQL), then SIGKILL to the group after 30 s, then any straggler. */
  async stop(): Promise<void> {
    await stopServerTree(this.child, this.pid);
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

let running: BenchServer | null = null;
let stopping: Promise<void> | null = null;

/** Temporary files to remove once the server is gone. */
const temporary: string[] = [];

function stopEverything(): Promise<void> {
  guestClient?.close();
  stopping ??= (running?.stop() ?? Promise.resolve()).catch((error) => console.error('stopping the server failed:', error))
    .finally(() => { for (const directory of temporary) fs.rmSync(directory, { recursive: true, force: true }); });
  return stopping;
}

const GUEST_WORKER = process.argv[2] === '--guest-worker';
let aborted = false;
if (!GUEST_WORKER) {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      console.error(`\n${signal}: stopping the server and its agents`);
      aborted = true;
      void stopEverything().then(() => process.exit(130));
    });
  }
}

// ---------------------------------------------------------------------------------------------
// The client: node:http with keep-alive, SSE parsed just enough to time the first content chunk
// and read the usage chunk.

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity });

/** Milliseconds on a clock both client processes share (performance.now() starts per process). */
const now = () => performance.timeOrigin + performance.now();

function streamChat(url: URL, key: string, body: string): Promise<Sample> {
  return new Promise((resolve) => {
    const startedAt = now();
    let firstTokenAt: number | null = null;
    let chunks = 0;
    let usageTokens: number | null = null;
    const request = http.request({
      host: '127.0.0.1', port: url.port, path: url.pathname, method: 'POST', agent,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (response) => {
      const status = response.statusCode ?? 0;
      response.setEncoding('utf8');
      let buffer = '';
      response.on('data', (part: string) => {
        if (status !== 200) {
          buffer += part;
          return;
        }
        const at = now();
        buffer += part;
        let end: number;
        while ((end = buffer.indexOf('\n\n')) !== -1) {
          const event = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          if (!event.startsWith('data: {')) continue;
          if (event.includes('"content":"') && !event.includes('"content":""')) {
            chunks++;
            firstTokenAt ??= at;
          } else if (event.includes('"usage":{')) {
            usageTokens = (JSON.parse(event.slice(6)) as { usage: { completion_tokens: number } }).usage.completion_tokens;
          }
        }
      });
      response.on('end', () => {
        let error: string | undefined;
        if (status !== 200) {
          try {
            error = (JSON.parse(buffer) as { error?: { code?: string; type?: string } }).error?.code ?? 'unknown';
          } catch {
            error = buffer.slice(0, 80);
          }
        }
        resolve({ startedAt, firstTokenAt, endedAt: now(), status, tokens: usageTokens ?? chunks, error });
      });
      response.on('error', (err) => resolve({ startedAt, firstTokenAt, endedAt: now(), status: 0, tokens: 0, error: err.message }));
    });
    request.on('error', (err) => resolve({ startedAt, firstTokenAt: null, endedAt: now(), status: 0, tokens: 0, error: err.message }));
    request.end(body);
  });
}

/**
 * `count` closed loops until `stop()`; a non-200 answer waits `backoffMs` before the next call.
 * Loop i starts i × `staggerMs` late and waits a random 0–`thinkMs` after each answer: with an
 * engine whose every request takes the same time, loops started together stay in lockstep and
 * the load becomes one burst of `count` requests per request duration (see bench/README.md).
 */
function closedLoop(count: number, url: URL, key: string, body: string, backoffMs: number, staggerMs = 0, thinkMs = 0) {
  const samples: Sample[] = [];
  let stopped = false;
  const loops = Array.from({ length: count }, async (_, index) => {
    if (staggerMs > 0) await sleep(index * staggerMs);
    while (!stopped && !aborted) {
      const sample = await streamChat(url, key, body);
      samples.push(sample);
      if (sample.status !== 200) await sleep(backoffMs);
      else if (thinkMs > 0) await sleep(Math.random() * thinkMs);
    }
  });
  return { samples, stop: async () => { stopped = true; await Promise.all(loops); } };
}

/**
 * The guest flood runs in a client process of its own (this file, forked): a real owner does not
 * share an event loop with hundreds of guest refusals a second, so the owner's TTFT must not pay
 * for parsing them. Both client processes still share the machine's two cores with the server.
 */
interface GuestJob { url: string; key: string; body: string; count: number; backoffMs: number }

class GuestClient {
  private readonly child: ChildProcess = fork(__filename, ['--guest-worker'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });

  get pid(): number {
    return this.child.pid!;
  }

  start(job: GuestJob): void {
    this.child.send({ start: job });
  }

  /** Stops the loops (in-flight requests finish) and returns every sample. */
  stop(): Promise<Sample[]> {
    return new Promise((resolve, reject) => {
      const exited = () => reject(new Error('the guest client exited'));
      this.child.once('exit', exited);
      this.child.once('message', (message: { samples: Sample[] }) => {
        this.child.off('exit', exited);
        resolve(message.samples);
      });
      this.child.send({ stop: true });
    });
  }

  close(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }
}

let guestClient: GuestClient | null = null;

function guestWorker(): void {
  let load: ReturnType<typeof closedLoop> | null = null;
  process.on('message', (message: { start?: GuestJob; stop?: true }) => {
    if (message.start) {
      const job = message.start;
      // Starts spread over one backoff, so the flood does not begin as one burst.
      load = closedLoop(job.count, new URL(job.url), job.key, job.body, job.backoffMs, job.backoffMs / job.count);
    } else if (message.stop) {
      const finishing = load;
      load = null;
      void (finishing?.stop() ?? Promise.resolve()).then(() => process.send!({ samples: finishing?.samples ?? [] }));
    }
  });
  // The benchmark went away (or a Ctrl-C reached the whole group): nothing left to do.
  process.on('disconnect', () => process.exit(0));
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// What a phase measures besides the samples: CPU per process role and of the whole machine,
// event-loop delay of this client and of the server.

interface Snapshot {
  at: number;
  cpu: Map<number, { role: string; micros: number }>;
  machine: { busy: number; steal: number; total: number };
  clientCpuMicros: number;
  serverMetrics: Map<string, number>;
}

function roleOf(pid: number, serverPid: number): string {
  if (pid === serverPid) return 'server';
  const command = commandOf(pid);
  if (command.includes('worker-agent/main.js')) return 'agents';
  if (command.includes('postgres')) return 'postgres';
  return 'other';
}

function machineTicks() {
  const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  const [user, nice, system, idle, iowait, irq, softirq, steal] = fields;
  const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
  return { busy: user + nice + system + irq + softirq, steal, total, idle: idle + iowait };
}

async function scrapeMetrics(baseUrl: string): Promise<Map<string, number>> {
  const values = new Map<string, number>();
  try {
    const text = await (await fetch(`${baseUrl}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (!line.startsWith('inference_nodejs_eventloop_lag') && !line.startsWith('inference_time_to_first_token_seconds_sum') && !line.startsWith('inference_time_to_first_token_seconds_count')) continue;
      const space = line.lastIndexOf(' ');
      values.set(line.slice(0, space), Number(line.slice(space + 1)));
    }
  } catch {
    // no metrics this time
  }
  return values;
}

async function snapshot(server: BenchServer): Promise<Snapshot> {
  // The scrape resets the server's event-loop delay histogram (prom-client), so it opens a window too.
  const serverMetrics = await scrapeMetrics(server.baseUrl);
  const cpu = new Map<number, { role: string; micros: number }>();
  for (const pid of [server.pid, ...descendants(server.pid)]) cpu.set(pid, { role: roleOf(pid, server.pid), micros: cpuMicros(pid) });
  if (guestClient) cpu.set(guestClient.pid, { role: 'guest client', micros: cpuMicros(guestClient.pid) });
  const usage = process.cpuUsage();
  return { at: now(), cpu, machine: machineTicks(), clientCpuMicros: usage.user + usage.system, serverMetrics };
}

function cpuBetween(before: Snapshot, after: Snapshot) {
  const seconds = (after.at - before.at) / 1000;
  const roles: Record<string, number> = { 'owner client': (after.clientCpuMicros - before.clientCpuMicros) / 1e6 / seconds };
  for (const [pid, { role, micros }] of after.cpu) {
    roles[role] = (roles[role] ?? 0) + (micros - (before.cpu.get(pid)?.micros ?? 0)) / 1e6 / seconds;
  }
  const total = after.machine.total - before.machine.total;
  const cores = os.cpus().length;
  const busyCores = ((after.machine.busy - before.machine.busy) / total) * cores;
  const ours = Object.values(roles).reduce((sum, value) => sum + value, 0);
  return {
    /** CPU cores used on average, per role. */
    coresByRole: mapValues(roles, round3),
    machineBusyCores: round3(busyCores),
    /** Busy time of the machine not accounted for by our processes (other work on the VM). */
    otherBusyCores: round3(Math.max(0, busyCores - ours)),
    stealPercent: round3(((after.machine.steal - before.machine.steal) / total) * 100),
  };
}

function serverLag(after: Snapshot) {
  const get = (name: string) => round3((after.serverMetrics.get(`inference_nodejs_eventloop_lag_${name}_seconds`) ?? NaN) * 1000);
  return { meanMs: get('mean'), p50Ms: get('p50'), p99Ms: get('p99'), maxMs: get('max') };
}

/** The server's own mean time to first byte per route over the window (its histogram's sum / count). */
function serverFirstByteMs(before: Snapshot, after: Snapshot, route: string): number | null {
  const sum = `inference_time_to_first_token_seconds_sum{route="${route}"}`;
  const count = `inference_time_to_first_token_seconds_count{route="${route}"}`;
  const requests = (after.serverMetrics.get(count) ?? 0) - (before.serverMetrics.get(count) ?? 0);
  if (requests <= 0) return null;
  return round3((((after.serverMetrics.get(sum) ?? 0) - (before.serverMetrics.get(sum) ?? 0)) / requests) * 1000);
}

// ---------------------------------------------------------------------------------------------

interface LoadStats {
  started: number;
  succeeded: number;
  refused429: number;
  failed: number;
  errors: Record<string, number>;
  requestsPerSecond: number;
  tokensPerSecond: number;
  attemptsPerSecond: number;
  ttftMs: { p50: number; p90: number; p99: number; max: number; count: number };
  latencyMs: { p50: number; p99: number };
}

/** Latency of requests started in [from, to); throughput of those that ended in it. */
function loadStats(samples: readonly Sample[], from: number, to: number): LoadStats {
  const seconds = (to - from) / 1000;
  const startedIn = samples.filter((sample) => sample.startedAt >= from && sample.startedAt < to);
  const endedIn = samples.filter((sample) => sample.endedAt >= from && sample.endedAt < to);
  const ok = endedIn.filter((sample) => sample.status === 200);
  const ttft = startedIn.filter((sample) => sample.status === 200 && sample.firstTokenAt !== null).map((sample) => sample.firstTokenAt! - sample.startedAt).sort((a, b) => a - b);
  const latency = startedIn.filter((sample) => sample.status === 200).map((sample) => sample.endedAt - sample.startedAt).sort((a, b) => a - b);
  const errors: Record<string, number> = {};
  for (const sample of endedIn) if (sample.status !== 200) errors[`${sample.status} ${sample.error ?? ''}`.trim()] = (errors[`${sample.status} ${sample.error ?? ''}`.trim()] ?? 0) + 1;
  return {
    started: startedIn.length, succeeded: ok.length,
    refused429: endedIn.filter((sample) => sample.status === 429).length,
    failed: endedIn.filter((sample) => sample.status !== 200 && sample.status !== 429).length,
    errors,
    requestsPerSecond: round3(ok.length / seconds),
    tokensPerSecond: round3(ok.reduce((sum, sample) => sum + sample.tokens, 0) / seconds),
    attemptsPerSecond: round3(endedIn.length / seconds),
    ttftMs: { p50: round3(percentile(ttft, 0.5)), p90: round3(percentile(ttft, 0.9)), p99: round3(percentile(ttft, 0.99)), max: round3(ttft.at(-1) ?? NaN), count: ttft.length },
    latencyMs: { p50: round3(percentile(latency, 0.5)), p99: round3(percentile(latency, 0.99)) },
  };
}

function ttftsIn(samples: readonly Sample[], from: number, to: number): number[] {
  return samples.filter((sample) => sample.startedAt >= from && sample.startedAt < to && sample.status === 200 && sample.firstTokenAt !== null)
    .map((sample) => round3(sample.firstTokenAt! - sample.startedAt));
}

interface PhaseResult {
  phase: 'A' | 'B';
  repetition: number;
  idleGuestSlots: { samples: number[]; used: number };
  guests: number;
  owner: LoadStats;
  guest: LoadStats | null;
  /** For pooled percentiles across repetitions. */
  ownerTtfts: number[];
  guestTtfts: number[];
  /** Owner requests of the window: [seconds from the window's start, TTFT ms] (to look for periodic stalls). */
  ownerTimeline: Array<[number, number]>;
  cpu: ReturnType<typeof cpuBetween>;
  serverEventLoopDelay: ReturnType<typeof serverLag>;
  clientEventLoopDelay: { p50Ms: number; p99Ms: number; maxMs: number };
  serverFirstByteMeanMs: { owner: number | null; guest: number | null };
  loadAverage1m: number;
}

class Bench {
  constructor(private readonly server: BenchServer, private readonly options: Options, private readonly ownerUrl: URL, private readonly guestKey: string) {}

  private readonly ownerBody = (options: Options) => JSON.stringify({
    model: MODEL, messages: [{ role: 'user', content: 'Tell me about shared serving.' }], max_tokens: options.maxTokens, stream: true, stream_options: { include_usage: true },
  });

  private readonly guestBody = (options: Options) => JSON.stringify({
    model: SHARED_ID, messages: [{ role: 'user', content: 'Tell me about shared serving.' }], max_tokens: options.maxTokens, stream: true, stream_options: { include_usage: true },
  });

  /** The pool's idle guest slots as GraphQL reports them, sampled 10 × 100 ms apart. */
  async idleGuestSlots(): Promise<number[]> {
    const samples: number[] = [];
    for (let index = 0; index < 10; index++) {
      const data = await graphql(this.server.baseUrl, this.server.key, '{ sharedModels { id idleGuestSlots } }');
      samples.push((data.sharedModels as Array<{ id: string; idleGuestSlots: number }>).find((model) => model.id === SHARED_ID)!.idleGuestSlots);
      await sleep(100);
    }
    return samples;
  }


  async phase(phase: 'A' | 'B', repetition: number): Promise<PhaseResult> {
    const { options, server } = this;
    // Spread over one request's expected duration (TTFT + the remaining tokens).
    const requestMs = options.ttftMs + (options.tokensPerSecond > 0 ? ((options.maxTokens - 1) * 1000) / options.tokensPerSecond : 0);
    const owner = closedLoop(options.ownerConcurrency, this.ownerUrl, server.key, this.ownerBody(options), 100, requestMs / options.ownerConcurrency, options.ownerThinkMs);
    await sleep(SETTLE_MS);
    const idleSamples = await this.idleGuestSlots();
    const idle = Math.round(median(idleSamples));
    const used = idle > 0 ? idle : computedIdleSlots(options);
    const guests = phase === 'B' ? options.guestMultiplier * used : 0;
    if (guests > 0) guestClient!.start({ url: `${server.baseUrl}/shared/v1/chat/completions`, key: this.guestKey, body: this.guestBody(options), count: guests, backoffMs: options.guestBackoffMs });
    await sleep(options.warmup * 1000);
    const clientDelay = monitorEventLoopDelay({ resolution: 2 });
    clientDelay.enable();
    const before = await snapshot(server);
    await sleep(options.seconds * 1000);
    const after = await snapshot(server);
    clientDelay.disable();
    const [, guestSamples] = await Promise.all([owner.stop(), guests > 0 ? guestClient!.stop() : null]);
    if (aborted) throw new Error('aborted');
    const ownerStats = loadStats(owner.samples, before.at, after.at);
    const ownerTtfts = ttftsIn(owner.samples, before.at, after.at);
    const result: PhaseResult = {
      phase, repetition, idleGuestSlots: { samples: idleSamples, used }, guests,
      owner: ownerStats, guest: guestSamples ? loadStats(guestSamples, before.at, after.at) : null, ownerTtfts,
      guestTtfts: guestSamples ? ttftsIn(guestSamples, before.at, after.at) : [],
      ownerTimeline: owner.samples.filter((sample) => sample.startedAt >= before.at && sample.startedAt < after.at && sample.status === 200 && sample.firstTokenAt !== null)
        .map((sample) => [round3((sample.startedAt - before.at) / 1000), round3(sample.firstTokenAt! - sample.startedAt)]),
      cpu: cpuBetween(before, after), serverEventLoopDelay: serverLag(after),
      clientEventLoopDelay: { p50Ms: round3(clientDelay.percentile(50) / 1e6), p99Ms: round3(clientDelay.percentile(99) / 1e6), maxMs: round3(clientDelay.max / 1e6) },
      serverFirstByteMeanMs: { owner: serverFirstByteMs(before, after, 'chat.completions'), guest: serverFirstByteMs(before, after, 'shared') },
      loadAverage1m: round3(os.loadavg()[0]),
    };
    // Let the last guest requests finish and the pool settle before the next phase.
    await sleep(1_000);
    return result;
  }
}

/** What the pool should leave guests with the owner load spread evenly over the replicas. */
function computedIdleSlots(options: Options): number {
  const { replicas, slots, ownerConcurrency, headroomFraction, maxGuestsPerReplica } = options;
  const headroom = Math.max(1, Math.ceil(slots * headroomFraction));
  return replicas * Math.max(0, Math.min(maxGuestsPerReplica, Math.floor(slots - ownerConcurrency / replicas - headroom)));
}

async function graphql(baseUrl: string, token: string, query: string, variables: Record<string, unknown> = {}): Promise<any> {
  const response = await fetch(`${baseUrl}/graphql`, {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: unknown; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: process.env.BENCH_SHARED_SECONDS ?? '30' }, warmup: { type: 'string', default: process.env.BENCH_SHARED_WARMUP ?? '5' },
      reps: { type: 'string', default: process.env.BENCH_SHARED_REPS ?? '3' }, replicas: { type: 'string', default: '2' }, slots: { type: 'string', default: '8' },
      'ttft-ms': { type: 'string', default: '40' }, 'tokens-per-second': { type: 'string', default: '50' }, 'max-tokens': { type: 'string', default: '32' },
      'owner-concurrency': { type: 'string' }, 'owner-think-ms': { type: 'string', default: '10' }, 'guest-multiplier': { type: 'string', default: '5' }, 'guest-backoff-ms': { type: 'string', default: '50' },
      'database-url': { type: 'string' }, 'profile-dir': { type: 'string' },
    },
  });
  const replicas = Number(values.replicas);
  const slots = Number(values.slots);
  const options: Options = {
    seconds: Number(values.seconds), warmup: Number(values.warmup), reps: Number(values.reps), replicas, slots,
    ttftMs: Number(values['ttft-ms']), tokensPerSecond: Number(values['tokens-per-second']), maxTokens: Number(values['max-tokens']),
    ownerConcurrency: Number(values['owner-concurrency'] ?? (replicas * slots) / 2), ownerThinkMs: Number(values['owner-think-ms']), guestMultiplier: Number(values['guest-multiplier']),
    guestBackoffMs: Number(values['guest-backoff-ms']), headroomFraction: 0.25, maxGuestsPerReplica: 16,
  };
  const profileDir = values['profile-dir'] ? path.resolve(values['profile-dir']) : null;
  if (profileDir) fs.mkdirSync(profileDir, { recursive: true });
  const profileArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [];

  // Agents get a fixed environment from the server (PATH, NODE_ENV, WORKER_*), not the server's
  // own, and `localAgentEnv` is not settable from the environment: node's --env-file, passed as
  // an agent node flag (LOCAL_AGENT_NODE_ARGS), gives them the CPU engine's timing.
  const agentEnvDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-shared-agent-'));
  temporary.push(agentEnvDir);
  const agentEnvFile = path.join(agentEnvDir, 'agent.env');
  fs.writeFileSync(agentEnvFile, `WORKER_CPU_TTFT_MS=${options.ttftMs}\nWORKER_CPU_TOKENS_PER_SECOND=${options.tokensPerSecond}\n`);
  const startedAt = Date.now();
  let server: BenchServer;
  try {
    server = await BenchServer.start({
      OPERATOR_TOKEN, LOCAL_AGENT_MAX_CONCURRENCY: String(slots), LOCAL_AGENT_NODE_ARGS: [`--env-file=${agentEnvFile}`, ...profileArgs].join(' '),
      // The flood is hundreds of requests a second: rate limits would answer before the pool does.
      DEFAULT_RPM_LIMIT: '1000000000', DEFAULT_TPD_LIMIT: '1000000000',
      SHARED_OWNER_HEADROOM_FRACTION: String(options.headroomFraction), SHARED_MAX_GUESTS_PER_REPLICA: String(options.maxGuestsPerReplica),
    }, values['database-url'], profileArgs);
  } catch (error) {
    await stopEverything();
    throw error;
  }
  try {
    const { baseUrl, key } = server;
    const [deployment] = (await graphql(baseUrl, key, '{ deployments { id slug } }')).deployments as Array<{ id: string; slug: string }>;
    await graphql(baseUrl, key, `mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: ${replicas}, maxReplicas: ${replicas}, shareIdleCapacity: true}) { sharing } }`, { id: deployment.id });
    console.log(`owner deployment ${deployment.slug}: ${replicas} replicas × ${slots} slots, sharing → activating`);
    await until(async () => {
      const current = (await graphql(baseUrl, key, 'query($id: ID!) { deployment(id: $id) { sharing replicas { status maxConcurrency } } }', { id: deployment.id })).deployment;
      const ready = current.replicas.filter((replica: { status: string; maxConcurrency: number }) => replica.status === 'Running' && replica.maxConcurrency === slots);
      return current.sharing === 'shared' && ready.length === replicas;
    }, 120_000, 'the deployment to be shared', 500);
    const guest = (await graphql(baseUrl, OPERATOR_TOKEN, 'mutation { createWorkspace(name: "bench-guest", creditBalance: "1000") { plaintext } }')).createWorkspace.plaintext as string;
    console.log(`shared after ${((Date.now() - startedAt) / 1000).toFixed(1)} s; guest workspace with 1000 credit`);
    const ownerUrl = new URL(`${baseUrl}/d/${deployment.slug}/v1/chat/completions`);
    const bench = new Bench(server, options, ownerUrl, guest);
    // Warm both paths (JIT, connection pools, the guest's credit row).
    const warm = closedLoop(4, ownerUrl, key, JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'warm' }], max_tokens: 4, stream: true }), 50);
    guestClient = new GuestClient();
    guestClient.start({ url: `${baseUrl}/shared/v1/chat/completions`, key: guest, body: JSON.stringify({ model: SHARED_ID, messages: [{ role: 'user', content: 'warm' }], max_tokens: 4, stream: true }), count: 2, backoffMs: 50 });
    await sleep(2_000);
    const [, warmGuest] = await Promise.all([warm.stop(), guestClient.stop()]);
    const bad = [...warm.samples, ...warmGuest].filter((sample) => sample.status !== 200);
    if (bad.length) throw new Error(`warm-up failed: ${JSON.stringify(bad.slice(0, 3))}`);

    const phases: PhaseResult[] = [];
    const loadBefore = os.loadavg()[0];
    for (let repetition = 1; repetition <= options.reps; repetition++) {
      for (const phase of ['A', 'B'] as const) {
        const result = await bench.phase(phase, repetition);
        phases.push(result);
        console.log(describePhase(result));
      }
    }
    write({
      machine: describeMachine(), database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL 17',
      loadAverage1m: { before: round3(loadBefore), after: round3(os.loadavg()[0]) },
      options: { ...options, settleMs: SETTLE_MS, profiled: profileDir !== null }, phases,
      summary: summarise(phases, options), wallSeconds: Math.round((Date.now() - startedAt) / 1000),
    });
  } finally {
    await stopEverything();
  }
}

function describePhase(result: PhaseResult): string {
  const { owner, guest } = result;
  const guestText = guest
    ? ` | ${result.guests} guests: ${guest.requestsPerSecond} req/s, 429 ${percent(guest.refused429, guest.refused429 + guest.succeeded + guest.failed)}, ttft p50 ${guest.ttftMs.p50}`
    : '';
  return `rep ${result.repetition} ${result.phase}: owner ttft p50 ${owner.ttftMs.p50} p90 ${owner.ttftMs.p90} p99 ${owner.ttftMs.p99} ms, ${owner.requestsPerSecond} req/s, ${owner.tokensPerSecond} tok/s` +
    `${guestText} | idle slots ${result.idleGuestSlots.samples.join(',')} | cpu ${JSON.stringify(result.cpu.coresByRole)} other ${result.cpu.otherBusyCores} | server lag p99 ${result.serverEventLoopDelay.p99Ms} ms`;
}

function summarise(phases: PhaseResult[], options: Options) {
  const of = (phase: 'A' | 'B') => phases.filter((result) => result.phase === phase);
  const med = (phase: 'A' | 'B', pick: (result: PhaseResult) => number | null | undefined) => round3(median(of(phase).map((result) => pick(result) ?? NaN)));
  const pooled = (phase: 'A' | 'B') => {
    const all = of(phase).flatMap((result) => result.ownerTtfts).sort((a, b) => a - b);
    return { count: all.length, p50: round3(percentile(all, 0.5)), p90: round3(percentile(all, 0.9)), p99: round3(percentile(all, 0.99)) };
  };
  const side = (phase: 'A' | 'B') => ({
    ownerTtftP50: med(phase, (result) => result.owner.ttftMs.p50), ownerTtftP90: med(phase, (result) => result.owner.ttftMs.p90),
    ownerTtftP99: med(phase, (result) => result.owner.ttftMs.p99), ownerRequestsPerSecond: med(phase, (result) => result.owner.requestsPerSecond),
    ownerTokensPerSecond: med(phase, (result) => result.owner.tokensPerSecond), ownerLatencyP99: med(phase, (result) => result.owner.latencyMs.p99),
    ownerFailed: of(phase).reduce((sum, result) => sum + result.owner.failed + result.owner.refused429, 0),
    ownerTtftPooled: pooled(phase),
    serverFirstByteMeanMs: med(phase, (result) => result.serverFirstByteMeanMs.owner),
    serverLagP99Ms: med(phase, (result) => result.serverEventLoopDelay.p99Ms), serverLagMaxMs: med(phase, (result) => result.serverEventLoopDelay.maxMs),
    clientLagP99Ms: med(phase, (result) => result.clientEventLoopDelay.p99Ms), clientLagMaxMs: med(phase, (result) => result.clientEventLoopDelay.maxMs),
    cores: Object.fromEntries(['owner client', 'guest client', 'server', 'agents', 'postgres'].map((role) => [role, med(phase, (result) => result.cpu.coresByRole[role] ?? 0)])),
    machineBusyCores: med(phase, (result) => result.cpu.machineBusyCores), otherBusyCores: med(phase, (result) => result.cpu.otherBusyCores),
    stealPercent: med(phase, (result) => result.cpu.stealPercent),
  });
  const a = side('A');
  const b = side('B');
  const guestPhases = of('B').filter((result) => result.guest);
  const guest = {
    guests: median(guestPhases.map((result) => result.guests)),
    idleGuestSlots: median(guestPhases.map((result) => result.idleGuestSlots.used)),
    refusedPercent: round3(median(guestPhases.map((result) => (result.guest!.refused429 / Math.max(1, result.guest!.refused429 + result.guest!.succeeded + result.guest!.failed)) * 100))),
    attemptsPerSecond: round3(median(guestPhases.map((result) => result.guest!.attemptsPerSecond))),
    requestsPerSecond: round3(median(guestPhases.map((result) => result.guest!.requestsPerSecond))),
    tokensPerSecond: round3(median(guestPhases.map((result) => result.guest!.tokensPerSecond))),
    ttftP50: round3(median(guestPhases.map((result) => result.guest!.ttftMs.p50))),
    ttftP90: round3(median(guestPhases.map((result) => result.guest!.ttftMs.p90))),
    ttftPooled: (() => {
      const all = guestPhases.flatMap((result) => result.guestTtfts).sort((left, right) => left - right);
      return { count: all.length, p50: round3(percentile(all, 0.5)), p99: round3(percentile(all, 0.99)), max: round3(all.at(-1) ?? NaN) };
    })(),
    ttftP99: round3(median(guestPhases.map((result) => result.guest!.ttftMs.p99))),
    failed: guestPhases.reduce((sum, result) => sum + result.guest!.failed, 0),
    errors: guestPhases.reduce<Record<string, number>>((all, result) => {
      for (const [error, count] of Object.entries(result.guest!.errors)) all[error] = (all[error] ?? 0) + count;
      return all;
    }, {}),
    serverFirstByteMeanMs: round3(median(guestPhases.map((result) => result.serverFirstByteMeanMs.guest ?? NaN))),
  };
  // What one guest attempt (mostly 429s) costs: the server's extra CPU in B over A, and the guest client's own.
  const serverMicrosPerGuestAttempt = round3(((b.cores.server - a.cores.server) * 1e6) / guest.attemptsPerSecond);
  const guestClientMicrosPerAttempt = round3((b.cores['guest client'] * 1e6) / guest.attemptsPerSecond);
  const riseP99 = round3(((b.ownerTtftP99 - a.ownerTtftP99) / a.ownerTtftP99) * 100);
  const risePooledP99 = round3(((b.ownerTtftPooled.p99 - a.ownerTtftPooled.p99) / a.ownerTtftPooled.p99) * 100);
  const perRepRise = [...new Set(phases.map((result) => result.repetition))].map((repetition) => {
    const pa = phases.find((result) => result.repetition === repetition && result.phase === 'A')!;
    const pb = phases.find((result) => result.repetition === repetition && result.phase === 'B')!;
    return round3(((pb.owner.ttftMs.p99 - pa.owner.ttftMs.p99) / pa.owner.ttftMs.p99) * 100);
  });
  return {
    a, b, guest: { ...guest, serverMicrosPerGuestAttempt, guestClientMicrosPerAttempt }, ownerTtftP99RisePercent: riseP99, ownerTtftPooledP99RisePercent: risePooledP99, perRepetitionP99RisePercent: perRepRise,
    verdict: riseP99 <= 10 ? 'PASS' : 'FAIL', expectedIdleGuestSlots: computedIdleSlots(options),
  };
}

function write(results: any): void {
  const stamp = `${new Date().toISOString().slice(0, 10)}-shared-${results.machine.gitSha}`;
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify(results, null, 2));
  const { options, summary } = results;
  const { a, b, guest } = summary;
  const signed = (value: number) => `${value >= 0 ? '+' : ''}${value}`;
  const rise = (left: number, right: number) => `${signed(round3(((right - left) / left) * 100))} %`;
  const cores = (side: typeof a) => `owner client ${side.cores['owner client']}, guest client ${side.cores['guest client']}, server ${side.cores.server}, agents ${side.cores.agents}, postgres ${side.cores.postgres}; machine ${side.machineBusyCores} (other work ${side.otherBusyCores}, steal ${side.stealPercent} %)`;
  const markdown = [
    `# Shared serving benchmark ${stamp}`, '',
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores, ${results.machine.memoryGiB} GiB, Linux ${results.machine.kernel}; Node ${results.machine.node}; ${results.database}; 1-minute load ${results.loadAverage1m.before} before, ${results.loadAverage1m.after} after.`,
    `Commit: ${results.machine.gitSha}.`,
    `Settings: one owner deployment of ${MODEL}, ${options.replicas} replicas × ${options.slots} slots (CPU engine: TTFT ${options.ttftMs} ms, ${options.tokensPerSecond} tokens/s), ` +
    `shareIdleCapacity on; owner headroom ${options.headroomFraction} of each replica's slots (${Math.max(1, Math.ceil(options.slots * options.headroomFraction))}), at most ${options.maxGuestsPerReplica} guests per replica. ` +
    `Owner: ${options.ownerConcurrency} closed loops of streamed chats (max_tokens ${options.maxTokens}) on its endpoint, started staggered over one request's duration, each waiting a random 0–${options.ownerThinkMs} ms after an answer (keeps them out of lockstep). Guests: ${options.guestMultiplier} × the idle guest slots ` +
    `(GraphQL sharedModels with the owner load running: ${guest.idleGuestSlots}, expected ${summary.expectedIdleGuestSlots}) = ${guest.guests} closed loops on /shared/v1/chat/completions, ` +
    `a 429 waits ${options.guestBackoffMs} ms (not Retry-After).`,
    `Method: ${options.reps} repetitions of A (owner alone) then B (owner + guest flood), interleaved, on the same replicas; each phase ${options.seconds} s measured after ${options.warmup + options.settleMs / 1000} s of load; medians over repetitions. ` +
    `TTFT is client-side, request sent → first SSE chunk with content. Clients: the owner loops run in this benchmark's process, the guest loops in a second client process; the server (gateway + control plane), its agents and PostgreSQL are child processes of their own. ` +
    `Whole run ${results.wallSeconds} s${options.profiled ? '; server and agents ran with --cpu-prof' : ''}.`, '',
    '## Target', '',
    '| target | A (owner alone) | B (+ guest flood) | change | goal | result |', '|---|---:|---:|---:|---|---|',
    `| owner TTFT p99 (median of repetitions) | ${a.ownerTtftP99} ms | ${b.ownerTtftP99} ms | ${signed(summary.ownerTtftP99RisePercent)} % | ≤ +10 % | **${summary.verdict}** |`, '',
    `Per repetition (B vs the A just before it): ${summary.perRepetitionP99RisePercent.map((value: number) => `${signed(value)} %`).join(', ')}. ` +
    `Pooled over all repetitions (${a.ownerTtftPooled.count} / ${b.ownerTtftPooled.count} owner requests): p99 ${a.ownerTtftPooled.p99} → ${b.ownerTtftPooled.p99} ms (${signed(summary.ownerTtftPooledP99RisePercent)} %).`, '',
    '## Owner', '',
    '| measure | A (owner alone) | B (+ guest flood) | change |', '|---|---:|---:|---:|',
    `| TTFT p50 ms | ${a.ownerTtftP50} | ${b.ownerTtftP50} | ${rise(a.ownerTtftP50, b.ownerTtftP50)} |`,
    `| TTFT p90 ms | ${a.ownerTtftP90} | ${b.ownerTtftP90} | ${rise(a.ownerTtftP90, b.ownerTtftP90)} |`,
    `| TTFT p99 ms | ${a.ownerTtftP99} | ${b.ownerTtftP99} | ${rise(a.ownerTtftP99, b.ownerTtftP99)} |`,
    `| whole stream p99 ms | ${a.ownerLatencyP99} | ${b.ownerLatencyP99} | ${rise(a.ownerLatencyP99, b.ownerLatencyP99)} |`,
    `| requests/s | ${a.ownerRequestsPerSecond} | ${b.ownerRequestsPerSecond} | ${rise(a.ownerRequestsPerSecond, b.ownerRequestsPerSecond)} |`,
    `| tokens/s | ${a.ownerTokensPerSecond} | ${b.ownerTokensPerSecond} | ${rise(a.ownerTokensPerSecond, b.ownerTokensPerSecond)} |`,
    `| failed (all repetitions) | ${a.ownerFailed} | ${b.ownerFailed} | |`,
    `| server's own mean time to first byte ms | ${a.serverFirstByteMeanMs} | ${b.serverFirstByteMeanMs} | ${rise(a.serverFirstByteMeanMs, b.serverFirstByteMeanMs)} |`,
    `| server event-loop delay p99 / max ms | ${a.serverLagP99Ms} / ${a.serverLagMaxMs} | ${b.serverLagP99Ms} / ${b.serverLagMaxMs} | |`,
    `| client event-loop delay p99 / max ms | ${a.clientLagP99Ms} / ${a.clientLagMaxMs} | ${b.clientLagP99Ms} / ${b.clientLagMaxMs} | |`, '',
    '## Guests (phase B)', '',
    '| guests | attempts/s | 429 rate | succeeded req/s | tokens/s | TTFT p50 / p90 / p99 ms | other failures |', '|---:|---:|---:|---:|---:|---|---:|',
    `| ${guest.guests} | ${guest.attemptsPerSecond} | ${guest.refusedPercent} % | ${guest.requestsPerSecond} | ${guest.tokensPerSecond} | ${guest.ttftP50} / ${guest.ttftP90} / ${guest.ttftP99} | ${guest.failed} |`, '',
    `Pooled guest TTFT over all B phases (${guest.ttftPooled.count} requests): p50 ${guest.ttftPooled.p50}, p99 ${guest.ttftPooled.p99}, max ${guest.ttftPooled.max} ms. ` +
    `Cost of one guest attempt (mostly 429s): server ${guest.serverMicrosPerGuestAttempt} µs of CPU (its extra CPU in B over A, the admitted guests' streams included), guest client ${guest.guestClientMicrosPerAttempt} µs.`, '',
    '## CPU (cores used on average during the measured window, medians)', '',
    `- A: ${cores(a)}`, `- B: ${cores(b)}`, '',
    '## Phases', '',
    '| rep | phase | owner TTFT p50 / p90 / p99 ms | owner req/s | guests | guest 429 % | guest req/s | server lag p99 ms | machine busy / other cores | load 1m |', '|---:|---|---|---:|---:|---:|---:|---:|---|---:|',
    ...results.phases.map((result: PhaseResult) => `| ${result.repetition} | ${result.phase} | ${result.owner.ttftMs.p50} / ${result.owner.ttftMs.p90} / ${result.owner.ttftMs.p99} | ${result.owner.requestsPerSecond} | ${result.guests} | ` +
      `${result.guest ? round3((result.guest.refused429 / Math.max(1, result.guest.refused429 + result.guest.succeeded + result.guest.failed)) * 100) : '–'} | ${result.guest?.requestsPerSecond ?? '–'} | ` +
      `${result.serverEventLoopDelay.p99Ms} | ${result.cpu.machineBusyCores} / ${result.cpu.otherBusyCores} | ${result.loadAverage1m} |`),
    '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${stamp}.{json,md}`);
}

function percent(part: number, whole: number): string {
  return `${whole ? round3((part / whole) * 100) : 0} %`;
}

function mapValues<T, U>(record: Record<string, T>, map: (value: T) => U): Record<string, U> {
  return Object.fromEntries(Object.entries(record).map(([key, value]) => [key, map(value)]));
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}

if (GUEST_WORKER) guestWorker();
else main().catch(async (error) => {
  console.error(error);
  await stopEverything();
  process.exit(1);
});
