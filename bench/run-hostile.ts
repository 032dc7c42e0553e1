/**
 * `npm run bench:hostile` (issue 19, part 2): do worst-case bodies from 8 attackers stall the
 * server for everyone else? One server process (`dist/gateway/main.js`, embedded PostgreSQL in
 * a temp dir, everything on 127.0.0.1) with its first-run CPU-engine text deployment. Three
 * phases of `BENCH_DURATION_S` (default 20) each:
 * - baseline: the ordinary clients alone;
 * - (a) no key: + `--attackers` loops sending worst-case bodies without an Authorization header;
 * - (b) key: the same with a valid key of the deployment's workspace (its own key, made with
 *   createApiKey).
 * Ordinary clients, in this process: one probes `GET /healthz` every `--probe-ms` (open loop:
 * a stalled server gets a queue of probes, each timed), one sends small chat completions
 * (max_tokens 16) to the deployment one after another. Attackers run in a forked process
 * (hostile-attackers.ts), rotating through: nested `[[[…` and `{"a":{"a":…` bodies, a query
 * of `__typename` × hundreds of thousands, huge shallow string/array bodies, to `/graphql` and
 * the deployment's `/v1/chat/completions`, and nested WebSocket frames before and after
 * `connection_init`, at each of `--sizes` (default: each body limit in the gateway's config,
 * i.e. every numeric `…BodyBytes` field of `loadGatewayConfig()` as the server sees it, plus
 * 4 MiB and 16 MiB).
 * Targets (issue 19): `/healthz` p99 ≤ 50 ms and ordinary chat p99 ≤ 2 × baseline, in (a) and (b).
 * Server RSS (VmRSS of the gateway process) sampled every 100 ms.
 *
 * Flags: --seconds (BENCH_DURATION_S, 20) --attackers 8 --sizes 4096,256KiB,4MiB,16MiB
 *        --ttft-ms 40 --tokens-per-second 100 --max-tokens 16 --probe-ms 50 --timeout-s 30
 *        --phases baseline,anonymous,keyed --suffix NAME (results file ends -NAME) --database-url URL
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { loadGatewayConfig } from '../gateway/gateway-config';
import type { AttackCase, AttackJob, AttackStats } from './hostile-attackers';
import { depthOf, typenameTokens, type Route, type Shape } from './hostile-payloads';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { commandOf, cpuMicros, descendants, rssBytes } from './processes';
import { saveResults } from './report';
import { ServerProcess, until } from './server-process';
import { PROJECT_ROOT } from './targets';

const MiB = 1024 * 1024;
type PhaseName = 'baseline' | 'anonymous' | 'keyed';
const PHASE_TITLES: Record<PhaseName, string> = { baseline: 'baseline (no attackers)', anonymous: '(a) attackers without a key', keyed: '(b) attackers with a valid key' };

interface Options {
  seconds: number; attackers: number; sizes: number[]; ttftMs: number; tokensPerSecond: number; maxTokens: number;
  probeMs: number; timeoutS: number; phases: PhaseName[]; suffix: string; warmupS: number;
}

interface Sample { startedAt: number; ms: number; status: number; error?: string }

// ---------------------------------------------------------------------------------------------
// Everything started here is stopped here, on success, failure or a signal.

let killServer: (() => void) | null = null;
let server: ServerProcess | null = null;
let attackerProcess: ChildProcess | null = null;
const temporary: string[] = [];
let stopping: Promise<void> | null = null;

function stopEverything(): Promise<void> {
  stopping ??= (async () => {
    if (attackerProcess && attackerProcess.exitCode === null && attackerProcess.signalCode === null) attackerProcess.kill('SIGKILL');
    try {
      if (server) await server.stop();
      else killServer?.();
    } catch (error) {
      console.error('stopping the server failed:', error);
      killServer?.();
    }
    for (const directory of temporary) fs.rmSync(directory, { recursive: true, force: true });
  })();
  return stopping;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping the attackers and the server`);
    void stopEverything().then(() => process.exit(130));
  });
}

// ---------------------------------------------------------------------------------------------
// Ordinary clients.

const now = () => performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function call(port: number, agent: http.Agent, method: string, requestPath: string, headers: http.OutgoingHttpHeaders, body: string | null, timeoutMs: number): Promise<Sample> {
  return new Promise((resolve) => {
    const startedAt = now();
    let settled = false;
    const finish = (status: number, error?: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ startedAt, ms: now() - startedAt, status, error });
    };
    const request = http.request({ host: '127.0.0.1', port, path: requestPath, method, agent, headers: body === null ? headers : { ...headers, 'content-length': Buffer.byteLength(body) } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (part: string) => {
        if (text.length < 2048) text += part;
      });
      response.on('end', () => finish(response.statusCode ?? 0, response.statusCode === 200 ? undefined : (/"code"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? text.slice(0, 80))));
      response.on('error', (error) => finish(0, error.message));
    });
    const timer = setTimeout(() => {
      finish(0, 'timeout');
      request.destroy();
    }, timeoutMs);
    request.on('error', (error: NodeJS.ErrnoException) => finish(0, error.code ?? error.message));
    request.end(body ?? undefined);
  });
}

/** GET /healthz every `intervalMs` on schedule, whether or not earlier probes have answered. */
function healthProbes(port: number, intervalMs: number, timeoutMs: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  const samples: Sample[] = [];
  const pending = new Set<Promise<void>>();
  const startedAt = now();
  let fired = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const tick = () => {
    const due = Math.floor((now() - startedAt) / intervalMs) + 1;
    while (!stopped && fired < due) {
      fired++;
      const probe = call(port, agent, 'GET', '/healthz', {}, null, timeoutMs).then((sample) => void samples.push(sample));
      pending.add(probe);
      void probe.finally(() => pending.delete(probe));
    }
    if (!stopped) timer = setTimeout(tick, Math.max(1, startedAt + fired * intervalMs - now()));
  };
  tick();
  return {
    samples,
    /** No new probes; waits for those still out (each bounded by its timeout). */
    stop: async () => {
      stopped = true;
      if (timer) clearTimeout(timer);
      await Promise.all([...pending]);
      agent.destroy();
    },
  };
}

/** Small chat completions one after another. */
function chatLoop(port: number, chatPath: string, key: string, maxTokens: number, timeoutMs: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const samples: Sample[] = [];
  let stopped = false;
  const body = JSON.stringify({ messages: [{ role: 'user', content: 'Say hello in a few words.' }], max_tokens: maxTokens });
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const loop = (async () => {
    while (!stopped) {
      const sample = await call(port, agent, 'POST', chatPath, headers, body, timeoutMs);
      samples.push(sample);
      if (sample.status !== 200) await sleep(50);
    }
  })();
  return { samples, stop: async () => { stopped = true; await loop; agent.destroy(); } };
}

// ---------------------------------------------------------------------------------------------
// The attacker process.

function startAttackers(job: AttackJob): Promise<{ go(): void; stop(): Promise<AttackStats>; pid: number }> {
  const child = fork(path.join(__dirname, 'hostile-attackers.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  attackerProcess = child;
  return new Promise((resolve, reject) => {
    const exited = () => reject(new Error('the attacker process exited before it was ready'));
    child.once('exit', exited);
    child.once('message', () => {
      child.off('exit', exited);
      resolve({
        pid: child.pid!,
        go: () => child.send({ go: true }),
        stop: () => new Promise<AttackStats>((done, fail) => {
          const gone = () => fail(new Error('the attacker process exited without its numbers'));
          child.once('exit', gone);
          child.once('message', (message: { stats: AttackStats }) => {
            child.off('exit', gone);
            child.disconnect();
            done(message.stats);
          });
          child.send({ stop: true });
        }),
      });
    });
    child.send({ prepare: job });
  });
}

function attackCases(sizes: number[]): AttackCase[] {
  const kinds: Array<{ transport: AttackCase['transport']; route: Route; shape: Shape }> = [
    { transport: 'http', route: 'graphql', shape: 'nested-array' },
    { transport: 'ws-before-init', route: 'graphql', shape: 'nested-array' },
    { transport: 'http', route: 'chat', shape: 'nested-array' },
    { transport: 'http', route: 'graphql', shape: 'typename' },
    { transport: 'http', route: 'graphql', shape: 'nested-object' },
    { transport: 'ws-after-init', route: 'graphql', shape: 'nested-array' },
    { transport: 'http', route: 'chat', shape: 'nested-object' },
    { transport: 'http', route: 'graphql', shape: 'huge-string' },
    { transport: 'ws-before-init', route: 'graphql', shape: 'nested-object' },
    { transport: 'http', route: 'chat', shape: 'huge-array' },
    { transport: 'ws-after-init', route: 'graphql', shape: 'nested-object' },
    { transport: 'http', route: 'graphql', shape: 'huge-array' },
    { transport: 'http', route: 'chat', shape: 'huge-string' },
  ];
  return kinds.flatMap((kind) => sizes.map((size) => {
    const where = kind.transport === 'http' ? `POST ${kind.route === 'graphql' ? '/graphql' : 'chat'}` : `${kind.transport === 'ws-before-init' ? 'WS frame before' : 'WS frame after'} connection_init`;
    return { ...kind, size, id: `${where}, ${kind.shape}, ${sizeText(size)}` };
  }));
}

// ---------------------------------------------------------------------------------------------
// One phase.

interface PhaseResult {
  name: PhaseName;
  seconds: number;
  healthz: Stats;
  chat: Stats;
  /** [seconds from the phase's start, ms] of every probe (to see when stalls happened). */
  healthzTimeline: Array<[number, number]>;
  rssMiB: { start: number; peak: number; windowEnd: number; end: number; highWaterMark: number };
  cpuCores: Record<string, number>;
  clientEventLoopDelayMs: { p99: number; max: number };
  /**
   * Seconds from the phase's end (attackers stopped) until every ordinary call of the phase had
   * been answered and then /healthz answered within 50 ms three times in a row (null: not within 60 s of the last answer).
   */
  recoverySeconds: number | null;
  attack: AttackStats | null;
}

interface Stats { count: number; p50Ms: number; p99Ms: number; maxMs: number; failed: number; errors: Record<string, number> }

function stats(samples: Sample[], from: number, to: number): Stats {
  // Failures count with the time they took (a probe that timed out after 60 s is a 60 s answer).
  const mine = samples.filter((sample) => sample.startedAt >= from && sample.startedAt < to);
  const times = mine.map((sample) => sample.ms).sort((left, right) => left - right);
  const errors: Record<string, number> = {};
  for (const sample of mine) if (sample.status !== 200) errors[`${sample.status} ${sample.error ?? ''}`.trim()] = (errors[`${sample.status} ${sample.error ?? ''}`.trim()] ?? 0) + 1;
  return {
    count: mine.length, p50Ms: round(percentile(times, 0.5)), p99Ms: round(percentile(times, 0.99)), maxMs: round(times.at(-1) ?? NaN),
    failed: mine.filter((sample) => sample.status !== 200).length, errors,
  };
}

function cpuSnapshot(serverPid: number, attackerPid: number | null): Map<string, number> {
  const roles = new Map<string, number>();
  const add = (role: string, micros: number) => roles.set(role, (roles.get(role) ?? 0) + micros);
  add('server', cpuMicros(serverPid));
  for (const pid of descendants(serverPid)) {
    const command = commandOf(pid);
    add(command.includes('worker-agent') ? 'agents' : command.includes('postgres') ? 'postgres' : 'other children', cpuMicros(pid));
  }
  if (attackerPid) add('attackers', cpuMicros(attackerPid));
  const usage = process.cpuUsage();
  add('ordinary clients', usage.user + usage.system);
  return roles;
}

function highWaterMarkBytes(pid: number): number {
  try {
    const line = fs.readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((entry) => entry.startsWith('VmHWM:'));
    return line ? Number(line.split(/\s+/)[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Until /healthz answers within 50 ms three times in a row (true), or 60 s (false). */
async function recover(port: number): Promise<true | null> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const startedAt = now();
  let fast = 0;
  try {
    while (now() - startedAt < 60_000) {
      const sample = await call(port, agent, 'GET', '/healthz', {}, null, 60_000);
      fast = sample.status === 200 && sample.ms <= 50 ? fast + 1 : 0;
      if (fast >= 3) return true;
      await sleep(50);
    }
    return null;
  } finally {
    agent.destroy();
  }
}

async function runPhase(name: PhaseName, context: { port: number; chatPath: string; key: string; attackerKey: string; serverPid: number; options: Options; cases: AttackCase[] }): Promise<PhaseResult> {
  const { port, chatPath, key, serverPid, options } = context;
  const attackers = name === 'baseline' ? null : await startAttackers({
    port, chatPath, key: name === 'keyed' ? context.attackerKey : null, attackers: options.attackers, cases: context.cases,
    timeoutMs: options.timeoutS * 1000, deadlineMs: (options.seconds + 60) * 1000,
  });
  const rssStart = rssBytes(serverPid);
  let rssPeak = rssStart;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssBytes(serverPid))), 100);
  const lag = monitorEventLoopDelay({ resolution: 5 });
  lag.enable();
  const cpuBefore = cpuSnapshot(serverPid, attackers?.pid ?? null);
  const startedAt = now();
  attackers?.go();
  const probes = healthProbes(port, options.probeMs, 60_000);
  const chat = chatLoop(port, chatPath, key, options.maxTokens, 60_000);
  await sleep(options.seconds * 1000);
  const endedAt = now();
  const cpuAfter = cpuSnapshot(serverPid, attackers?.pid ?? null);
  const attack = attackers ? await attackers.stop() : null;
  attackerProcess = null;
  const rssWindowEnd = rssBytes(serverPid);
  lag.disable();
  await Promise.all([probes.stop(), chat.stop()]);
  const recovered = await recover(port);
  const recoverySeconds = recovered === null ? null : round((now() - endedAt) / 1000);
  clearInterval(sampler);
  rssPeak = Math.max(rssPeak, rssBytes(serverPid));
  const seconds = (endedAt - startedAt) / 1000;
  const cpuCores: Record<string, number> = {};
  for (const [role, micros] of cpuAfter) cpuCores[role] = Math.round(((micros - (cpuBefore.get(role) ?? 0)) / 1e6 / seconds) * 1000) / 1000;
  const result: PhaseResult = {
    name, seconds: round(seconds),
    healthz: stats(probes.samples, startedAt, endedAt), chat: stats(chat.samples, startedAt, endedAt),
    healthzTimeline: probes.samples.filter((sample) => sample.startedAt >= startedAt && sample.startedAt < endedAt)
      .sort((left, right) => left.startedAt - right.startedAt).map((sample) => [round((sample.startedAt - startedAt) / 1000), round(sample.ms)]),
    rssMiB: { start: mib(rssStart), peak: mib(rssPeak), windowEnd: mib(rssWindowEnd), end: mib(rssBytes(serverPid)), highWaterMark: mib(highWaterMarkBytes(serverPid)) },
    cpuCores, clientEventLoopDelayMs: { p99: round(lag.percentile(99) / 1e6), max: round(lag.max / 1e6) },
    recoverySeconds, attack,
  };
  console.log(`${PHASE_TITLES[name]}: /healthz p50 ${result.healthz.p50Ms} p99 ${result.healthz.p99Ms} max ${result.healthz.maxMs} ms (${result.healthz.count}); ` +
    `chat p50 ${result.chat.p50Ms} p99 ${result.chat.p99Ms} ms (${result.chat.count}, ${result.chat.failed} failed); RSS ${result.rssMiB.start} → peak ${result.rssMiB.peak} → ${result.rssMiB.end} MiB; ` +
    `recovered in ${recoverySeconds ?? '> 60'} s${attack ? `; ${attack.attempts} attacks` : ''}`);
  return result;
}

// ---------------------------------------------------------------------------------------------

function sourceState() {
  const git = (...args: string[]) => execFileSync('git', ['--no-optional-locks', ...args], { cwd: PROJECT_ROOT, encoding: 'utf8' });
  try {
    const changed = git('status', '--porcelain', '--untracked-files=all').split('\n').filter(Boolean);
    const outsideBench = changed.filter((line) => !line.slice(3).startsWith('bench/'));
    return {
      commit: git('rev-parse', 'HEAD').trim(), shortCommit: git('rev-parse', '--short', 'HEAD').trim(),
      dirty: changed.length > 0, changedOutsideBench: outsideBench, changedInBench: changed.filter((line) => line.slice(3).startsWith('bench/')),
    };
  } catch {
    return { commit: 'unknown', shortCommit: 'unknown', dirty: true, changedOutsideBench: ['(not a git checkout)'], changedInBench: [] };
  }
}

/** The gateway's size limits as this server sees them (its config with the environment the benchmark gives it). */
function gatewayLimits(): Record<string, number> {
  try {
    const config = loadGatewayConfig({}) as unknown as Record<string, unknown>;
    return Object.fromEntries(Object.entries(config).filter(([name, value]) => typeof value === 'number' && /body|payload|message|token|depth/i.test(name)) as Array<[string, number]>);
  } catch {
    return {};
  }
}

function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(MiB|MB|KiB|KB|B)?$/i.exec(text.trim());
  if (!match) throw new Error(`--sizes: cannot read "${text}" (bytes, or e.g. 4MiB, 512KiB)`);
  const unit = (match[2] ?? 'B').toLowerCase();
  const factor = unit === 'mib' ? MiB : unit === 'mb' ? 1e6 : unit === 'kib' ? 1024 : unit === 'kb' ? 1e3 : 1;
  return Math.round(Number(match[1]) * factor);
}

async function main(): Promise<void> {
  const limits = gatewayLimits();
  // Every body limit the gateway has (e.g. maxBodyBytes; a /graphql or anonymous cap where there is one): each is "the max body size the server allows" somewhere.
  const bodyLimits = Object.entries(limits).filter(([name]) => /bodybytes$/i.test(name)).map(([, value]) => value);
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: process.env.BENCH_DURATION_S ?? '20' }, attackers: { type: 'string', default: '8' },
      sizes: { type: 'string', default: [...(bodyLimits.length ? bodyLimits : [4 * MiB]), '4MiB', '16MiB'].join(',') }, 'ttft-ms': { type: 'string', default: '40' },
      'tokens-per-second': { type: 'string', default: '100' }, 'max-tokens': { type: 'string', default: '16' }, 'probe-ms': { type: 'string', default: '50' },
      'timeout-s': { type: 'string', default: '30' }, phases: { type: 'string', default: 'baseline,anonymous,keyed' }, suffix: { type: 'string', default: '' },
      warmup: { type: 'string', default: '3' }, 'database-url': { type: 'string' },
    },
  });
  const phases = values.phases.split(',').map((phase) => phase.trim()) as PhaseName[];
  for (const phase of phases) if (!(phase in PHASE_TITLES)) throw new Error(`--phases: unknown phase ${phase} (baseline, anonymous, keyed)`);
  const options: Options = {
    seconds: Number(values.seconds), attackers: Number(values.attackers),
    sizes: [...new Set(values.sizes.split(',').map(parseSize))].sort((left, right) => left - right),
    ttftMs: Number(values['ttft-ms']), tokensPerSecond: Number(values['tokens-per-second']), maxTokens: Number(values['max-tokens']),
    probeMs: Number(values['probe-ms']), timeoutS: Number(values['timeout-s']), phases, suffix: values.suffix, warmupS: Number(values.warmup),
  };
  const source = sourceState();
  const machine = describeMachine();
  const cases = attackCases(options.sizes);

  // The agents get the CPU engine's timing through node's --env-file (the server hands its agents a fixed environment; see run-shared.ts).
  const agentEnvDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-hostile-agent-'));
  temporary.push(agentEnvDir);
  const agentEnvFile = path.join(agentEnvDir, 'agent.env');
  fs.writeFileSync(agentEnvFile, `WORKER_CPU_TTFT_MS=${options.ttftMs}\nWORKER_CPU_TOKENS_PER_SECOND=${options.tokensPerSecond}\n`);
  const wallStart = Date.now();
  server = await ServerProcess.start({
    name: 'bench-hostile', databaseUrl: values['database-url'], onSpawn: (kill) => (killServer = kill),
    env: {
      LOCAL_AGENT_NODE_ARGS: `--env-file=${agentEnvFile}`,
      // The ordinary client must not meet the default 600 requests a minute (nor the attackers: they are refused before any limit today).
      DEFAULT_RPM_LIMIT: '1000000', DEFAULT_TPD_LIMIT: '1000000000000',
    },
  });
  const port = Number(new URL(server.baseUrl).port);
  const slug = /Base URL:\s+\S*\/d\/([a-z0-9-]+)\/v1/.exec(server.output())?.[1];
  const model = /Model:\s+(\S+)/.exec(server.output())?.[1] ?? 'unknown';
  if (!slug) throw new Error(`no deployment in the first-run banner: ${server.output().slice(-1500)}`);
  const chatPath = `/d/${slug}/v1/chat/completions`;
  const readyAgent = new http.Agent({ keepAlive: false });
  const chatBody = JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }], max_tokens: 2 });
  await until(async () => (await call(port, readyAgent, 'POST', chatPath, { authorization: `Bearer ${server!.key}`, 'content-type': 'application/json' }, chatBody, 10_000)).status === 200, 120_000, 'the deployment to answer', 250);
  const attackerKey = (await server.graphql('mutation { createApiKey(input: {name: "bench-hostile attacker"}) { plaintext } }')).createApiKey.plaintext as string;
  console.log(`server pid ${server.pid} on ${server.baseUrl}, deployment ${slug} (${model}); ${cases.length} attack cases; sizes ${options.sizes.map(sizeText).join(', ')}`);

  // Warm-up (JIT, connection pools), unmeasured.
  const warmChat = chatLoop(port, chatPath, server.key, options.maxTokens, 60_000);
  const warmProbes = healthProbes(port, options.probeMs, 60_000);
  await sleep(options.warmupS * 1000);
  await Promise.all([warmChat.stop(), warmProbes.stop()]);

  const context = { port, chatPath, key: server.key, attackerKey, serverPid: server.pid, options, cases };
  const results: PhaseResult[] = [];
  const loadBefore = os.loadavg()[0];
  for (const phase of phases) {
    results.push(await runPhase(phase, context));
    await sleep(1_000);
  }
  const report = {
    machine, source, loadAverage1m: { before: round(loadBefore), after: round(os.loadavg()[0]) },
    server: { pid: server.pid, model, deployment: slug, gatewayLimits: limits, database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL' },
    options, cases: cases.map((attackCase) => ({ ...attackCase, depth: depthOf(attackCase.shape, attackCase.size), typenameTokens: attackCase.shape === 'typename' ? typenameTokens(attackCase.size) : undefined })),
    phases: results, targets: targets(results), wallSeconds: Math.round((Date.now() - wallStart) / 1000),
  };
  const name = `${new Date().toISOString().slice(0, 10)}-hostile-${source.shortCommit}${options.suffix ? `-${options.suffix}` : ''}`;
  saveResults(name, report, markdown(name, report));
}

interface Target { phase: PhaseName; target: string; measured: number; goal: string; pass: boolean }

function targets(results: PhaseResult[]): Target[] {
  const baseline = results.find((result) => result.name === 'baseline');
  return results.filter((result) => result.name !== 'baseline').flatMap((result): Target[] => {
    const rows: Target[] = [{ phase: result.name, target: '/healthz p99', measured: result.healthz.p99Ms, goal: '≤ 50 ms', pass: result.healthz.p99Ms <= 50 && result.healthz.count > 0 }];
    if (baseline) {
      const limit = 2 * baseline.chat.p99Ms;
      rows.push({ phase: result.name, target: 'ordinary chat p99', measured: result.chat.p99Ms, goal: `≤ 2 × ${baseline.chat.p99Ms} = ${round(limit)} ms`, pass: result.chat.p99Ms <= limit && result.chat.count > 0 });
    }
    return rows;
  });
}

function markdown(name: string, report: any): string {
  const { machine, source, options, server: info } = report;
  const phases = report.phases as PhaseResult[];
  const tree = !source.dirty ? 'clean (the numbers are of this commit)'
    : source.changedOutsideBench.length === 0 ? `dirty in bench/ only (${source.changedInBench.length} paths: this benchmark's own files and results); the server's code is the commit's`
      : `**dirty**: ${source.changedOutsideBench.length} paths outside bench/ differ from the commit, so the server ran uncommitted code: ${source.changedOutsideBench.slice(0, 30).map((line: string) => `\`${line.trim()}\``).join(', ')}${source.changedOutsideBench.length > 30 ? ', …' : ''}`;
  const limits = Object.entries(info.gatewayLimits).map(([key, value]) => `${key} ${value}`).join(', ') || 'not readable';
  const row = (stat: Stats) => `${stat.count} | ${stat.p50Ms} | ${stat.p99Ms} | ${stat.maxMs} | ${stat.failed}${stat.failed ? ` (${Object.entries(stat.errors).map(([error, count]) => `${error} ×${count}`).join(', ')})` : ''}`;
  const lines = [
    `# Hostile clients benchmark ${name}`, '',
    `Commit: ${source.commit}. Working tree: ${tree}.`,
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ${info.database}; 1-minute load ${report.loadAverage1m.before} before, ${report.loadAverage1m.after} after.`, '',
    `Settings: one server (\`dist/gateway/main.js\`, first-run workspace and deployment ${info.deployment} of ${info.model} on the CPU engine: TTFT ${options.ttftMs} ms, ${options.tokensPerSecond} tokens/s; ` +
    `rate limits raised so the ordinary client never meets them). Gateway limits in effect: ${limits}. ` +
    `Each phase ${options.seconds} s, in order ${options.phases.join(', ')}. Ordinary clients (this process): GET /healthz every ${options.probeMs} ms on schedule (open loop), ` +
    `and chat completions (max_tokens ${options.maxTokens}, not streamed) one after another. Attackers (a process of their own): ${options.attackers} loops, each sending its next ` +
    `body as soon as the previous one was answered, refused or closed (HTTP keep-alive; a new WebSocket per attempt; an attempt is cut after ${options.timeoutS} s), ` +
    `rotating through ${report.cases.length} cases at sizes ${options.sizes.map(sizeText).join(', ')}; phase (b) uses a second key of the same workspace. ` +
    `Latencies count failures with the time they took. Whole run ${report.wallSeconds} s.`, '',
    '## Targets', '',
    '| phase | target | measured | goal | result |', '|---|---|---:|---|---|',
    ...report.targets.map((target: Target) => `| ${PHASE_TITLES[target.phase]} | ${target.target} | ${target.measured} ms | ${target.goal} | **${target.pass ? 'PASS' : 'FAIL'}** |`), '',
    '## Ordinary clients', '',
    '| phase | /healthz probes | p50 ms | p99 ms | max ms | failed | chat calls | p50 ms | p99 ms | max ms | failed | recovered after | client lag p99 / max ms |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---|',
    ...phases.map((phase) => `| ${PHASE_TITLES[phase.name]} | ${row(phase.healthz)} | ${row(phase.chat)} | ${phase.recoverySeconds === null ? '> 60 s' : `${phase.recoverySeconds} s`} | ${phase.clientEventLoopDelayMs.p99} / ${phase.clientEventLoopDelayMs.max} |`), '',
    '"recovered after": from the end of the phase (attackers stopped at once) until the phase\'s last ordinary call was answered and then /healthz answered within 50 ms three times in a row.', '',
    '## Server memory (VmRSS of the gateway process, MiB)', '',
    '| phase | start | peak (100 ms samples) | at the phase\'s end | after recovery | VmHWM (since start) |', '|---|---:|---:|---:|---:|---:|',
    ...phases.map((phase) => `| ${PHASE_TITLES[phase.name]} | ${phase.rssMiB.start} | ${phase.rssMiB.peak} | ${phase.rssMiB.windowEnd} | ${phase.rssMiB.end} | ${phase.rssMiB.highWaterMark} |`), '',
    '## CPU (cores used on average in the phase)', '',
    ...phases.map((phase) => `- ${PHASE_TITLES[phase.name]}: ${Object.entries(phase.cpuCores).map(([role, cores]) => `${role} ${cores}`).join(', ')}`), '',
  ];
  for (const phase of phases) {
    if (!phase.attack) continue;
    const attack = phase.attack;
    lines.push(`## Attackers: ${PHASE_TITLES[phase.name]}`, '',
      `${attack.attempts} attempts answered in ${attack.seconds} s (${round(attack.attempts / attack.seconds)}/s), ${attack.abortedAtEnd} still running at the phase's end (aborted then; the last column). ` +
      `"answers": HTTP status and error code, \`close <code>\` for a WebSocket the server closed, \`error <code>\` for a connection error, \`timeout\` after ${options.timeoutS} s.`, '',
      '| case | attempts | p50 ms | p99 ms | max ms | answers | still running at the end (for ms) |', '|---|---:|---:|---:|---:|---|---|',
      ...attack.cases.map((entry) => `| ${entry.id} | ${entry.attempts} | ${entry.attempts ? entry.p50Ms : '–'} | ${entry.attempts ? entry.p99Ms : '–'} | ${entry.attempts ? entry.maxMs : '–'} | ` +
        `${Object.entries(entry.answers).sort((left, right) => right[1] - left[1]).map(([answer, count]) => `${answer} ×${count}`).join(', ') || '–'} | ${entry.stillRunningAtEnd ? `${entry.stillRunningAtEnd} (${entry.stillRunningForMs})` : ''} |`), '');
  }
  lines.push('Depth of the nested bodies: `[[[…` size / 2 levels, `{"a":…` size / 6; the typename query has (size − 14) / 11 tokens. The JSON file has the cases, every probe\'s time (`healthzTimeline`) and all numbers.', '');
  return lines.join('\n');
}

function sizeText(bytes: number): string {
  if (bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes % 1024 === 0) return `${bytes / 1024} KiB`;
  return `${bytes} B`;
}

const mib = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;
const round = (value: number) => Math.round(value * 10) / 10;

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
}).finally(async () => {
  await stopEverything();
  process.exit();
});
