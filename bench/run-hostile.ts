/**
 * `npm run bench:hostile` (issues 19 and 33): does one hostile tenant take the server from
 * everyone else? Each phase (bench/hostile/phases.ts; `--phases` picks them, so one can be run
 * alone) gets a fresh server (`dist/gateway/main.js`, embedded PostgreSQL in a temp dir,
 * everything on 127.0.0.1, an operator token) with its first-run CPU-engine deployment, which
 * is the ordinary tenant's. Then:
 * 1. the attacker's workspaces, keys and deployments are made (bench/hostile/attacker-setup.ts);
 * 2. the ordinary tenant (bench/hostile/ordinary-tenant.ts) warms up, then runs alone for
 *    `--seconds`: the baseline;
 * 3. the attacker process is forked and prepares (uploads it reuses; unmeasured);
 * 4. the attack window: the attacker ramps up (at most `--ramp-s`) and holds for `--seconds`
 *    while the tenant runs again;
 * 5. the attacker stops, and the time until the server answers `/healthz` fast again is taken.
 * The server's processes are watched throughout (bench/hostile/server-watch.ts). Targets per
 * phase (issue 33): `/healthz` p99 ≤ 50 ms; the tenant's chat, `{creditBalance}` and
 * `createApiKey` p99 ≤ 2 × its baseline's; gateway + agents RSS ≤ `--budget-mib` + 200 MiB; no
 * call of the tenant refused.
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadBudgetLimits } from '../control-plane/budgets/budget-config';
import { loadGatewayConfig } from '../gateway/gateway-config';
import type { AttackSettings } from './hostile/attack';
import { startAttacker, type AttackerHandle } from './hostile/attacker-handle';
import { setUpAttacker } from './hostile/attacker-setup';
import { sizeText } from './hostile/attacks/body-bombs';
import { phaseMarkdown, stats, summaryTable, targets, type PhaseResult, type WindowResult } from './hostile/hostile-report';
import { call } from './hostile/http-call';
import { startTenant, TENANT_CALLS, type RunningTenant, type TenantOptions } from './hostile/ordinary-tenant';
import { PHASE_NAMES, phaseNamed, type PhaseSpec } from './hostile/phases';
import { watchServer, type WatchSummary } from './hostile/server-watch';
import { describeMachine } from './machine';
import { saveResults } from './report';
import { ServerProcess, until } from './server-process';
import { PROJECT_ROOT } from './targets';

const MiB = 1024 * 1024;
const OPERATOR_TOKEN = `bench-hostile-${crypto.randomBytes(12).toString('hex')}`;

interface Options {
  seconds: number; warmupS: number; rampS: number; timeoutS: number; probeMs: number; graphqlPauseMs: number; maxTokens: number;
  ttftMs: number; tokensPerSecond: number; budgetMiB: number; usageRecords: number; phases: string[]; suffix: string; raiseLimits: boolean;
  settings: AttackSettings;
}

// ---------------------------------------------------------------------------------------------
// Everything started here is stopped here, on success, failure or a signal.

let killServer: (() => void) | null = null;
let server: ServerProcess | null = null;
let attacker: AttackerHandle | null = null;
const temporary: string[] = [];

async function stopServer(): Promise<void> {
  attacker?.kill();
  attacker = null;
  try {
    if (server) await server.stop();
    else killServer?.();
  } catch (error) {
    console.error('stopping the server failed:', error);
    killServer?.();
  }
  server = null;
  killServer = null;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping the attacker and the server`);
    void stopServer().finally(() => {
      for (const directory of temporary) fs.rmSync(directory, { recursive: true, force: true });
      process.exit(130);
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (value: number) => Math.round(value * 10) / 10;

// ---------------------------------------------------------------------------------------------

/** The tenant's calls sent in [from, to) (each with its whole time, so stop the tenant first) and what the watch saw. */
function windowOf(tenant: RunningTenant, from: number, to: number, watch: WatchSummary): WindowResult {
  return {
    seconds: round((to - from) / 1000),
    tenant: Object.fromEntries(TENANT_CALLS.map((name) => [name, stats(tenant.samples[name], from, to)])) as WindowResult['tenant'],
    watch,
    healthzTimeline: tenant.samples.healthz.filter((answer) => answer.startedAt >= from && answer.startedAt < to)
      .sort((left, right) => left.startedAt - right.startedAt).map((answer) => [round((answer.startedAt - from) / 1000), round(answer.ms)]),
  };
}

/** Until /healthz answers within 50 ms three times in a row (seconds since `since`), or 60 s (null). */
async function recover(port: number, since: number): Promise<number | null> {
  const startedAt = performance.now();
  let fast = 0;
  while (performance.now() - startedAt < 60_000) {
    const answer = await call({ port, method: 'GET', path: '/healthz', timeoutMs: 60_000 });
    fast = answer.status === 200 && answer.ms <= 50 ? fast + 1 : 0;
    if (fast >= 3) return round((performance.now() - since) / 1000);
    await sleep(50);
  }
  return null;
}

async function runPhase(spec: PhaseSpec, options: Options, agentEnvFile: string): Promise<PhaseResult> {
  console.log(`\n== ${spec.name}: ${spec.title}`);
  server = await ServerProcess.start({
    name: 'bench-hostile', onSpawn: (kill) => (killServer = kill),
    env: {
      LOCAL_AGENT_NODE_ARGS: `--env-file=${agentEnvFile}`, OPERATOR_TOKEN,
      // The ordinary tenant must not meet the default 600 requests a minute (nor, as in issue 19, the attackers).
      ...(options.raiseLimits ? { DEFAULT_RPM_LIMIT: '1000000', DEFAULT_TPD_LIMIT: '1000000000000' } : {}),
    },
  });
  const port = Number(new URL(server.baseUrl).port);
  const slug = /Base URL:\s+\S*\/d\/([a-z0-9-]+)\/v1/.exec(server.output())?.[1];
  const modelId = /Model:\s+(\S+)/.exec(server.output())?.[1];
  if (!slug || !modelId) throw new Error(`no deployment in the first-run banner: ${server.output().slice(-1500)}`);
  const basePath = `/d/${slug}/v1`;
  const chatBody = JSON.stringify({ messages: [{ role: 'user', content: 'ready?' }], max_tokens: 2 });
  await until(async () => (await call({ port, method: 'POST', path: `${basePath}/chat/completions`, headers: { authorization: `Bearer ${server!.key}`, 'content-type': 'application/json' }, body: chatBody, timeoutMs: 10_000 })).status === 200,
    120_000, 'the deployment to answer', 250);
  const { target, notes } = await setUpAttacker({ port, tenantKey: server.key, operatorToken: OPERATOR_TOKEN, databaseUrl: server.databaseUrl, modelId, tenantChatPath: `${basePath}/chat/completions` }, spec.needs, options.usageRecords);
  console.log(`server pid ${server.pid} on ${server.baseUrl}; ${Object.entries(notes).map(([what, value]) => `${what}: ${value}`).join('; ')}`);

  const tenantOptions: TenantOptions = {
    port, key: server.key, basePath, maxTokens: options.maxTokens, probeMs: options.probeMs, graphqlPauseMs: options.graphqlPauseMs,
    uploads: spec.tenantUploads ?? false, timeoutMs: 60_000,
  };
  const warm = startTenant(tenantOptions);
  await sleep(options.warmupS * 1000);
  await warm.stop();

  const baselineWatch = watchServer(server.pid, null);
  const baselineFrom = performance.now();
  const alone = startTenant(tenantOptions);
  await sleep(options.seconds * 1000);
  const baselineTo = performance.now();
  const baselineSeen = baselineWatch.stop();
  await alone.stop();
  const baseline = windowOf(alone, baselineFrom, baselineTo, baselineSeen);
  console.log(`baseline: /healthz p99 ${baseline.tenant.healthz.p99Ms} ms, chat p99 ${baseline.tenant.chat.p99Ms} ms, creditBalance p99 ${baseline.tenant.creditBalance.p99Ms} ms, createApiKey p99 ${baseline.tenant.createApiKey.p99Ms} ms; load ${baseline.watch.loadAverage1m.end}`);

  const windowMs = options.seconds * 1000;
  attacker = await startAttacker({ attack: spec.name, target, settings: options.settings, rampMs: options.rampS * 1000, deadlineMs: options.rampS * 1000 + windowMs + 120_000 });
  const attackWatch = watchServer(server.pid, attacker.pid);
  const from = performance.now();
  const beside = startTenant(tenantOptions);
  let failed: Error | null = null;
  const ramp = attacker.go().then((seconds) => round(seconds), (error: Error) => {
    failed = error;
    return null;
  });
  const rampSeconds = await Promise.race([ramp, sleep(options.rampS * 1000 + 5_000).then(() => null)]);
  if (failed) throw failed;
  if (rampSeconds !== null) console.log(`the attacker holds what it set out to after ${rampSeconds} s`);
  await sleep(Math.max(0, from + (rampSeconds ?? options.rampS) * 1000 + windowMs - performance.now()));
  const to = performance.now();
  const report = await attacker.stop();
  attacker = null;
  const seen = attackWatch.stop();
  // Calls still out (a stalled server's) are waited for: they count with their whole time.
  await beside.stop();
  const attackWindow = windowOf(beside, from, to, seen);
  const recoverySeconds = await recover(port, to);
  await stopServer();
  const { agents } = attackWindow.watch;
  // Processes are counted here, on the host, not by the attacker.
  const counted = { ...report, achieved: { ...report.achieved, 'agent processes started (counted on the host)': agents.peak - agents.start } };
  const attack = { ...attackWindow, rampSeconds, recoverySeconds, report: counted };
  const result: PhaseResult = {
    name: spec.name, title: spec.title, finding: spec.finding, setup: notes, headline: spec.headline, baseline, attack,
    targets: targets(baseline, attack, options.budgetMiB),
  };
  console.log(`${spec.name}: /healthz p99 ${attack.tenant.healthz.p99Ms} ms; chat p99 ${attack.tenant.chat.p99Ms} ms; creditBalance ${attack.tenant.creditBalance.p99Ms} ms; createApiKey ${attack.tenant.createApiKey.p99Ms} ms; ` +
    `RSS gateway + agents ${attack.watch.serverRssPeakMiB} MiB; ${result.targets.filter((row) => !row.pass).length} of ${result.targets.length} targets FAIL`);
  console.log(`attacker: ${JSON.stringify(report.achieved)} ${JSON.stringify(report.answers)}`);
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
      // The server's code is that of the last commit outside bench/: the results are named by it (a benchmark-only commit changes no figure).
      serverCommit: git('log', '-1', '--format=%h', '--', '.', ':(exclude)bench').trim(),
      dirty: changed.length > 0, changedOutsideBench: outsideBench, changedInBench: changed.filter((line) => line.slice(3).startsWith('bench/')),
    };
  } catch {
    return { commit: 'unknown', shortCommit: 'unknown', serverCommit: 'unknown', dirty: true, changedOutsideBench: ['(not a git checkout)'], changedInBench: [] };
  }
}

function parseSize(text: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(MiB|MB|KiB|KB|B)?$/i.exec(text.trim());
  if (!match) throw new Error(`cannot read the size "${text}" (bytes, or e.g. 4MiB, 512KiB, 100MB)`);
  const unit = (match[2] ?? 'B').toLowerCase();
  const factor = unit === 'mib' ? MiB : unit === 'mb' ? 1e6 : unit === 'kib' ? 1024 : unit === 'kb' ? 1e3 : 1;
  return Math.round(Number(match[1]) * factor);
}

function readOptions(): Options {
  // Every body limit the gateway has (e.g. maxBodyBytes; a /graphql or anonymous cap where there is one): each is "the max body size the server allows" somewhere.
  const config = loadGatewayConfig({}) as unknown as Record<string, unknown>;
  const bodyLimits = Object.entries(config).filter(([name, value]) => typeof value === 'number' && /bodybytes$/i.test(name)).map(([, value]) => value as number);
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: process.env.BENCH_DURATION_S ?? '15' }, warmup: { type: 'string', default: '3' }, 'ramp-s': { type: 'string', default: '60' },
      'timeout-s': { type: 'string', default: '30' }, 'probe-ms': { type: 'string', default: '50' }, 'graphql-pause-ms': { type: 'string', default: '50' },
      'max-tokens': { type: 'string', default: '16' }, 'ttft-ms': { type: 'string', default: '40' }, 'tokens-per-second': { type: 'string', default: '100' },
      // The server's memory budget as it reads it (MEMORY_BUDGET_BYTES), unless given.
      'budget-mib': { type: 'string', default: String(Math.round((loadBudgetLimits().memory.server ?? 512 * 1024 * 1024) / (1024 * 1024))) }, 'usage-records': { type: 'string', default: '20000' },
      phases: { type: 'string', default: PHASE_NAMES.join(',') }, suffix: { type: 'string', default: '' }, 'default-limits': { type: 'boolean', default: false },
      attackers: { type: 'string', default: '8' }, sizes: { type: 'string', default: [...(bodyLimits.length ? bodyLimits : [4 * MiB]), '4MiB', '16MiB'].join(',') },
      'nested-file': { type: 'string', default: '100MB' }, 'nested-line': { type: 'string', default: '1MiB' }, 'nested-depths': { type: 'string', default: '120,200' },
      'nested-in-flight': { type: 'string', default: '1' },
      subscriptions: { type: 'string', default: '40000' }, 'subscription-sockets': { type: 'string', default: '40' },
      'subscription-field': { type: 'string', default: 'replicaLoad' }, 'subscription-update-ms': { type: 'string', default: '0' },
      'usage-aliases': { type: 'string', default: '450' }, 'usage-parallel': { type: 'string', default: '4' },
      downloads: { type: 'string', default: '25' }, 'download-size': { type: 'string', default: '100MB' },
      'slow-bodies': { type: 'string', default: '500' }, 'slow-body-size': { type: 'string', default: '4MiB' }, 'slow-body-fill-s': { type: 'string', default: '10' },
      'half-open': { type: 'string', default: '20000' }, 'half-open-partial': { type: 'string', default: '0.5' },
      'local-deployments': { type: 'string', default: '2' }, 'local-replicas': { type: 'string', default: '4' },
    },
  });
  const field = values['subscription-field'];
  if (field !== 'replicaLoad' && field !== 'deploymentUpdated') throw new Error('--subscription-field: replicaLoad or deploymentUpdated');
  return {
    seconds: Number(values.seconds), warmupS: Number(values.warmup), rampS: Number(values['ramp-s']), timeoutS: Number(values['timeout-s']),
    probeMs: Number(values['probe-ms']), graphqlPauseMs: Number(values['graphql-pause-ms']), maxTokens: Number(values['max-tokens']),
    ttftMs: Number(values['ttft-ms']), tokensPerSecond: Number(values['tokens-per-second']), budgetMiB: Number(values['budget-mib']),
    usageRecords: Number(values['usage-records']), phases: values.phases.split(',').map((phase) => phaseNamed(phase.trim()).name), suffix: values.suffix,
    raiseLimits: !values['default-limits'],
    settings: {
      attackers: Number(values.attackers), sizes: [...new Set(values.sizes.split(',').map(parseSize))].sort((left, right) => left - right),
      timeoutMs: Number(values['timeout-s']) * 1000,
      nestedFileBytes: parseSize(values['nested-file']), nestedLineBytes: parseSize(values['nested-line']),
      nestedDepths: values['nested-depths'].split(',').map(Number), nestedBatchesInFlight: Number(values['nested-in-flight']),
      subscriptions: Number(values.subscriptions), subscriptionSockets: Number(values['subscription-sockets']), subscriptionField: field,
      subscriptionUpdateMs: Number(values['subscription-update-ms']),
      usageAliases: Number(values['usage-aliases']), usageParallel: Number(values['usage-parallel']),
      downloads: Number(values.downloads), downloadBytes: parseSize(values['download-size']),
      slowBodies: Number(values['slow-bodies']), slowBodyBytes: parseSize(values['slow-body-size']), slowBodyFillMs: Number(values['slow-body-fill-s']) * 1000,
      halfOpen: Number(values['half-open']), halfOpenPartialShare: Number(values['half-open-partial']),
      localDeployments: Number(values['local-deployments']), localReplicas: Number(values['local-replicas']),
    },
  };
}

async function main(): Promise<void> {
  const options = readOptions();
  const source = sourceState();
  const machine = describeMachine();
  // The agents get the CPU engine's timing through node's --env-file (the server hands its agents a fixed environment; see run-shared.ts).
  const agentEnvDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-hostile-agent-'));
  temporary.push(agentEnvDir);
  const agentEnvFile = path.join(agentEnvDir, 'agent.env');
  fs.writeFileSync(agentEnvFile, `WORKER_CPU_TTFT_MS=${options.ttftMs}\nWORKER_CPU_TOKENS_PER_SECOND=${options.tokensPerSecond}\n`);
  const wallStart = Date.now();
  const results: PhaseResult[] = [];
  for (const name of options.phases) results.push(await runPhase(phaseNamed(name), options, agentEnvFile));
  const report = { machine, source, fileLimit: fileLimit(), options, phases: results, wallSeconds: Math.round((Date.now() - wallStart) / 1000) };
  const name = `${new Date().toISOString().slice(0, 10)}-hostile-${source.serverCommit}${options.suffix ? `-${options.suffix}` : ''}`;
  saveResults(name, report, markdown(name, report));
}

function fileLimit(): string {
  const line = fs.readFileSync('/proc/self/limits', 'utf8').split('\n').find((entry) => entry.startsWith('Max open files'));
  return line?.replace('Max open files', '').trim().split(/\s+/).slice(0, 2).join(' / ') ?? 'unknown';
}

function markdown(name: string, report: { machine: any; source: ReturnType<typeof sourceState>; fileLimit: string; options: Options; phases: PhaseResult[]; wallSeconds: number }): string {
  const { machine, source, options } = report;
  const tree = !source.dirty ? 'clean (the numbers are of this commit)'
    : source.changedOutsideBench.length === 0 ? `dirty in bench/ only (${source.changedInBench.length} paths: this benchmark's own files and results); the server's code is the commit's`
      : `**dirty**: ${source.changedOutsideBench.length} paths outside bench/ differ from the commit, so the server ran uncommitted code: ${source.changedOutsideBench.slice(0, 30).map((line) => `\`${line.trim()}\``).join(', ')}`;
  const settings = options.settings;
  return [
    `# Hostile tenants benchmark ${name}`, '',
    `Commit: ${source.commit}; the server's code is that of ${source.serverCommit} (the last commit outside bench/). Working tree: ${tree}.`,
    `Machine: ${machine.cpu}, ${machine.cores} cores (shared with other work: the load average of each window is in its table), ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ` +
    `file descriptors per process (soft / hard) ${report.fileLimit}. Whole run ${report.wallSeconds} s.`, '',
    `Each phase on a fresh server (embedded PostgreSQL; first-run deployment on the CPU engine: TTFT ${options.ttftMs} ms, ${options.tokensPerSecond} tokens/s` +
    `${options.raiseLimits ? '; default RPM and TPD raised so the ordinary tenant never meets them' : ''}): the attacker's setup, a ${options.warmupS} s warm-up, a ${options.seconds} s baseline of the ordinary tenant alone, ` +
    `then the attack window: the attacker's ramp-up (at most ${options.rampS} s) and ${options.seconds} s of holding, the tenant beside it. ` +
    `Ordinary tenant: GET /healthz every ${options.probeMs} ms on schedule, each on a new connection; chat completions (max_tokens ${options.maxTokens}) one after another; ` +
    `\`{creditBalance}\` and \`createApiKey\`, each in its own loop, ${options.graphqlPauseMs} ms apart; a small file upload each second where the phase says so. Latencies count failures with the time they took (60 s timeout). ` +
    `Attack settings: ${settings.attackers} body-bomb loops at ${settings.sizes.map(sizeText).join(', ')}; nested file ${round(settings.nestedFileBytes / 1e6)} MB in lines of ${sizeText(settings.nestedLineBytes)} nesting ${settings.nestedDepths.join(' / ')}, ${settings.nestedBatchesInFlight} batch at a time; ` +
    `${settings.subscriptions} ${settings.subscriptionField} subscriptions on ${settings.subscriptionSockets} sockets; ${settings.usageAliases} usage aliases × ${settings.usageParallel} in parallel over ${options.usageRecords} seeded usage records; ` +
    `${settings.downloads} unread downloads of ${round(settings.downloadBytes / 1e6)} MB; ${settings.slowBodies} slow bodies of ${sizeText(settings.slowBodyBytes)} filled over ${settings.slowBodyFillMs / 1000} s; ` +
    `${settings.halfOpen} half-open connections (${settings.halfOpenPartialShare * 100}% with a partial request line); ${settings.localDeployments} local deployments × ${settings.localReplicas} replicas.`, '',
    '## Summary', '',
    ...summaryTable(report.phases), '',
    `"÷ unloaded": the attack window's p99 over the same phase's baseline p99. RSS target: ≤ --budget-mib ${options.budgetMiB} + 200 MiB.`, '',
    ...report.phases.flatMap((phase) => phaseMarkdown(phase, options.budgetMiB)),
    'The JSON file has every number, each window\'s /healthz probes (`healthzTimeline`) and the server\'s processes second by second (`watch.timeline`: seconds, gateway MiB, agents, agents MiB, gateway fds).', '',
  ].join('\n');
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
}).finally(async () => {
  await stopServer();
  for (const directory of temporary) fs.rmSync(directory, { recursive: true, force: true });
  process.exit();
});
