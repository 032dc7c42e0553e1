/**
 * The relay between servers (proto/PROTOCOL.md, "Between servers"): two server processes on
 * one database. Server A holds the local agent (whose `openai` engine is the bench upstream)
 * and the embedded PostgreSQL; server B is started with LOCAL_AGENTS=false on A's database, so
 * every chat request on it is relayed over `cluster.v1.RelayService.Run` to A.
 *
 *   A:    client → A (gateway → gRPC → agent → upstream)            the "direct" path
 *   B→A:  client → B (gateway → relay gRPC) → A (→ agent → upstream)  the relayed path
 *
 * Both targets report the CPU of every process, B included (while A is measured alone, B's
 * CPU is its background: heartbeats, the capacity loop), so the relay's cost on each side is
 * the difference between the two targets in the same repetition.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { commandOf, descendants, pin, stopServerTree, waitForOutput } from './processes';
import { markdownTables, median, number, signed, summarize, type Summary } from './report';
import type { RunResult } from './scenario';
import { freePort, PROJECT_ROOT, type Target } from './targets';

export interface RelayPair {
  /** client → A */
  readonly direct: Target;
  /** client → B → A */
  readonly relayed: Target;
  stop(): Promise<void>;
}

export interface RelayPairOptions {
  /** Extra node flags for server A and server B (e.g. `--cpu-prof --cpu-prof-dir=DIR`, written when it exits). */
  readonly nodeArgsA?: string[];
  readonly nodeArgsB?: string[];
  /** How often B writes its registry row and reads A's. @default 200 */
  readonly heartbeatMsB?: number;
}

/** The heartbeat of A is the default (1 s): B sees A's free slots at most ~1 s late, plenty with 1024 slots. */
const SHARED_ENV = { DEFAULT_RPM_LIMIT: '1000000000', DEFAULT_TPD_LIMIT: '1000000000000000' };

/** A server process in its own process group (so a terminal Ctrl-C reaches only the bench, which stops it in order). */
class Server {
  private output = '';
  private constructor(readonly child: ChildProcess, readonly dataDir: string, readonly port: number) {
    child.stdout!.on('data', (part) => (this.output += part));
    child.stderr!.on('data', (part) => (this.output += part));
  }

  static async spawn(name: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<Server> {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), `bench-relay-${name}-`));
    // As root, embedded PostgreSQL runs initdb as a `postgres` user, which must enter the folder.
    fs.chmodSync(dataDir, 0o755);
    const port = await freePort();
    const child = spawn(process.execPath, [...nodeArgs, path.join(PROJECT_ROOT, 'dist/gateway/main.js')], {
      env: {
        PATH: process.env.PATH, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', PUBLIC_URL: `http://127.0.0.1:${port}`,
        GRPC_HOST: '127.0.0.1', LOG_LEVEL: 'warn', ...SHARED_ENV, ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    return new Server(child, dataDir, port);
  }

  get pid(): number {
    return this.child.pid!;
  }

  said(): string {
    return this.output;
  }

  waitFor(pattern: RegExp, timeoutMs: number, what: string): Promise<RegExpExecArray> {
    return waitForOutput(this.child, () => this.output, pattern, timeoutMs, what);
  }

  /** SIGINT (drains agents, stops the embedded PostgreSQL), SIGKILL to the group after 30 s, then any straggler. */
  async stop(): Promise<void> {
    await stopServerTree(this.child, this.pid);
    fs.rmSync(this.dataDir, { recursive: true, force: true });
  }
}

async function answers(url: string, key: string): Promise<boolean> {
  try {
    const response = await fetch(url, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }] }),
    });
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

async function until(check: () => Promise<boolean>, timeoutMs: number, what: string, said: () => string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the server said: ${said().slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Starts A (embedded PostgreSQL on a fixed free port, one local agent on the upstream), waits
 * for its first 200, then B on A's database URL, and waits for B's first relayed 200.
 * `register` gets each server as soon as it is spawned, so a failure or Ctrl-C while starting
 * still stops it.
 */
export async function startRelayPair(
  upstream: { url: string; pid: number }, cpus: string | null, register: (stop: () => Promise<void>) => void, options: RelayPairOptions = {},
): Promise<RelayPair> {
  const databasePort = await freePort();
  const grpcPortA = await freePort();
  const grpcPortB = await freePort();
  // One secrets key for both, as servers sharing a database must (sealed secrets are read by either).
  const secretsKey = crypto.randomBytes(32).toString('hex');
  const servers: Server[] = [];
  // Once (Ctrl-C and the `finally` both call it); B first: it is a client of A's embedded database.
  let stopping: Promise<void> | null = null;
  const stop = () => (stopping ??= (async () => {
    for (const server of [...servers].reverse()) await server.stop();
  })());
  register(stop);

  const a = await Server.spawn('a', {
    EMBEDDED_DATABASE_PORT: String(databasePort), GRPC_PORT: String(grpcPortA), CLUSTER_ADDRESS: `127.0.0.1:${grpcPortA}`,
    SECRETS_ENCRYPTION_KEY: secretsKey, LOCAL_ENGINE: 'openai', LOCAL_ENGINE_URL: upstream.url, LOCAL_AGENT_MAX_CONCURRENCY: '1024',
  }, options.nodeArgsA);
  servers.push(a);
  const key = (await a.waitFor(/API key:\s+(mk-\S+)/, 120_000, 'server A\'s first-run banner'))[1];
  const urlA = `${(await a.waitFor(/Base URL:\s+(\S+)/, 10_000, 'server A\'s base URL'))[1]}/chat/completions`;
  await until(() => answers(urlA, key), 60_000, 'the first 200 from server A', () => a.said());

  const databaseUrl = `postgres://postgres:postgres@127.0.0.1:${databasePort}/postgres`;
  const b = await Server.spawn('b', {
    DATABASE_URL: databaseUrl, GRPC_PORT: String(grpcPortB), CLUSTER_ADDRESS: `127.0.0.1:${grpcPortB}`, SECRETS_ENCRYPTION_KEY: secretsKey,
    LOCAL_AGENTS: 'false', CLUSTER_HEARTBEAT_INTERVAL_MS: String(options.heartbeatMsB ?? 200),
  }, options.nodeArgsB);
  servers.push(b);
  // A later start on the same database prints the deployments, not a key (it was shown once, by A).
  await b.waitFor(/Deployments:/, 120_000, 'server B\'s banner');
  const urlB = urlA.replace(/^http:\/\/[^/]+/, `http://127.0.0.1:${b.port}`);
  await until(() => answers(urlB, key), 60_000, 'the first relayed 200 from server B', () => b.said());

  const roles = () => {
    const below = descendants(a.pid);
    return {
      A: [a.pid],
      agent: below.filter((pid) => commandOf(pid).includes('worker-agent/main.js')),
      // A's embedded PostgreSQL: B's connections are backends of it too.
      postgres: below.filter((pid) => commandOf(pid).includes('postgres')),
      B: [b.pid],
    };
  };
  const initial = roles();
  pin([a.pid, b.pid, ...initial.agent, ...initial.postgres], cpus);
  const processes = () => {
    const current = roles();
    pin(current.postgres, cpus);
    return { ...current, upstream: [upstream.pid] };
  };
  return {
    direct: { name: 'A', url: urlA, key, processes, stop: async () => {} },
    relayed: { name: 'B→A', url: urlB, key, processes, stop: async () => {} },
    stop,
  };
}

/**
 * The relay part's results page: what the hop costs per scenario (relayed minus direct in the
 * same repetition, medians), then the full tables (baseline A) and the per-repetition numbers.
 */
export function relayMarkdown(runs: RunResult[], machine: Record<string, string | number>, name: string, options: Record<string, unknown>): string {
  const summaries = summarize(runs, 'A');
  const scenarios = [...new Set(runs.map((run) => run.scenario))];
  const seconds = Number(options.seconds);
  const of = (scenario: string, target: string) => summaries.find((summary) => summary.scenario === scenario && summary.target === target);
  const pairs = (scenario: string) => runs.filter((run) => run.scenario === scenario && run.target === 'B→A').map((relayed) => ({
    relayed, direct: runs.find((run) => run.scenario === scenario && run.target === 'A' && run.repetition === relayed.repetition),
  })).filter((pair): pair is { relayed: RunResult; direct: RunResult } => pair.direct !== undefined);
  /** B's CPU per relayed request without its background (heartbeats, capacity loop), measured while A alone was loaded. */
  const background = (direct: RunResult) => (direct.cpuMicros?.B ?? direct.cpuMicrosPerRequest.B * direct.requests) / seconds;
  const bNet = (pair: { relayed: RunResult; direct: RunResult }) =>
    (pair.relayed.cpuMicros?.B ?? pair.relayed.cpuMicrosPerRequest.B * pair.relayed.requests) / Math.max(1, pair.relayed.requests) - (background(pair.direct) * seconds) / Math.max(1, pair.relayed.requests);
  const cpu = (summary: Summary | undefined, role: string) => number(summary?.cpuMicrosPerRequest[role] ?? null, 0);
  const cost = ['| scenario | req/s A → B→A | p50 ms A → B→A | added p50 / p99 ms | TTFB p50 added ms | CPU µs/request on B (net of background) | on A: A → B→A | agent | postgres | failed |',
    '|---|---|---|---|---|---|---|---|---|---:|'];
  for (const scenario of scenarios) {
    const direct = of(scenario, 'A');
    const relayed = of(scenario, 'B→A');
    if (!direct || !relayed) continue;
    const net = median(pairs(scenario).map(bNet));
    cost.push(`| ${scenario} | ${number(direct.requestsPerSecond, 0)} → ${number(relayed.requestsPerSecond, 0)} | ${number(direct.p50Ms)} → ${number(relayed.p50Ms)} `
      + `| ${signed(relayed.addedP50Ms)} / ${signed(relayed.addedP99Ms)} | ${relayed.addedTtfbP50Ms === null ? '–' : signed(relayed.addedTtfbP50Ms)} `
      + `| ${cpu(relayed, 'B')} (${number(net, 0)}) | ${cpu(direct, 'A')} → ${cpu(relayed, 'A')} | ${cpu(direct, 'agent')} → ${cpu(relayed, 'agent')} `
      + `| ${cpu(direct, 'postgres')} → ${cpu(relayed, 'postgres')} | ${direct.failed + relayed.failed} |`);
  }
  const perRepetition = ['| scenario | added p50 ms | added p99 ms | B µs/request | B background, ms CPU/s |', '|---|---|---|---|---|'];
  for (const scenario of scenarios) {
    const list = pairs(scenario).sort((x, y) => x.relayed.repetition - y.relayed.repetition);
    perRepetition.push(`| ${scenario} | ${list.map((pair) => signed(pair.relayed.p50Ms - pair.direct.p50Ms)).join(', ')} | ${list.map((pair) => signed(pair.relayed.p99Ms - pair.direct.p99Ms)).join(', ')} `
      + `| ${list.map((pair) => number(pair.relayed.cpuMicrosPerRequest.B, 0)).join(', ')} | ${list.map((pair) => number(background(pair.direct) / 1000, 1)).join(', ')} |`);
  }
  return [
    `# Relay benchmark ${name}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ${machine.wrk}.`,
    `Commit: ${machine.gitSha}.`,
    'Setup: two server processes on one database. A: embedded PostgreSQL, one local agent (max concurrency 1024) whose `openai` engine is the bench upstream, '
      + 'registry heartbeat 1 s (default). B: `LOCAL_AGENTS=false`, `DATABASE_URL` = A\'s embedded PostgreSQL, `CLUSTER_HEARTBEAT_INTERVAL_MS=200`, so every chat request on B '
      + 'is relayed over `cluster.v1.RelayService.Run` to A. Targets: **A** = client → A (gateway → gRPC → agent → upstream); **B→A** = client → B → relay gRPC → A → agent → upstream.',
    `Method: ${options.reps} repetitions, A and B→A interleaved (order alternating by repetition), medians; ${options.seconds} s per run after ${options.warmupSeconds} s warm-up; `
      + `paced runs at ${options.rate} req/s; ` + (options.pinning ? 'load generator and upstream pinned to CPU 0; A, its agent, PostgreSQL and B to CPU 1.' : 'no CPU pinning.')
      + (options.profiled ? ' A and B ran with --cpu-prof (their numbers include the profiler).' : '')
      + (Array.isArray(options.loadAverage) && options.loadAverage.length === 2 ? ` Load average (1 min) before/after: ${options.loadAverage.map((value: number) => value.toFixed(2)).join(' / ')}.` : ''),
    'CPU µs/request: utime+stime from /proc over the measured run ÷ completed requests, per process. "added": B→A minus A in the same repetition, then the median. '
      + 'B\'s "net" subtracts its background (its CPU while A alone was loaded, per second, times the run) from its CPU per relayed request. '
      + 'postgres is A\'s embedded database, B\'s connections included.', '',
    '## Cost of the relay', '', ...cost, '',
    '## Results (added = B→A minus A)', '', markdownTables(summaries),
    '## Per repetition', '', ...perRepetition, '',
  ].join('\n');
}
