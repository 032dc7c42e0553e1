/**
 * `npm run bench`: direct vs nginx vs ours, interleaved (A, B, C, A, B, C, …), medians of the
 * repetitions, for JSON and 20-chunk streams at c=8, c=64 and a paced rate; then the parts
 * (gRPC frames/s, relay cost per streamed chunk); then the relay between servers (relay.ts:
 * the same scenarios through server A directly and through server B relaying to A, on one
 * database, interleaved). Results go to bench/results/ (the relay part: <date>-relay-<sha>.md).
 * Flags: --seconds 10 --warmup 2 --reps 3 --rate 500 --no-pin --only direct,nginx,koa,floor,ours,relay --no-parts
 *        (`root` in --only: the same server as `ours` on the workspace base URL /v1, routed by model)
 *        --first-warmup 10 (seconds of unmeasured load on each target before the first repetition)
 *        --scenarios 'json c=8,stream c=8' (a subset, e.g. for a profile; BENCH_SERVER_NODE_ARGS / BENCH_AGENT_NODE_ARGS add node flags)
 *        --relay-seconds (half of --seconds) --relay-profile DIR (--cpu-prof of servers A and B, in DIR/A and DIR/B)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { measureGrpcFrames } from './grpc-frames';
import { describeMachine } from './machine';
import { hasCommand, runningCommands } from './processes';
import { floorBreakdown, freshResultName, markdownTables, summarize, targetsCheck } from './report';
import { relayMarkdown, startRelayPair } from './relay';
import { measure, warmUp, type RunResult, type Scenario } from './scenario';
import { directTarget, floorTarget, koaTarget, nginxTarget, oursTarget, PROJECT_ROOT, startUpstreamProcess, workspaceRootTarget, type Target } from './targets';

/** What to stop, in reverse order, on the way out: after the run, on a failure, or on Ctrl-C. */
const cleanups: Array<() => Promise<void>> = [];
let stoppingAll: Promise<void> | null = null;

function stopAll(): Promise<void> {
  stoppingAll ??= (async () => {
    for (const child of runningCommands) child.kill('SIGKILL');
    for (const stop of cleanups.splice(0).reverse()) await stop().catch((error) => console.error('stopping failed:', error));
  })();
  return stoppingAll;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    console.error(`\n${signal}: stopping the servers, agents, upstream and load generators`);
    void stopAll().finally(() => process.exit(130));
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '10' }, warmup: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
      rate: { type: 'string', default: '500' }, 'no-pin': { type: 'boolean', default: false }, only: { type: 'string', default: 'direct,nginx,koa,floor,ours,relay' },
      'no-parts': { type: 'boolean', default: false }, 'relay-seconds': { type: 'string' }, 'relay-profile': { type: 'string' },
      scenarios: { type: 'string' }, 'first-warmup': { type: 'string', default: '10' },
    },
  });
  if (!hasCommand('wrk')) throw new Error('wrk is not installed: apt-get install wrk');
  const pinning = !values['no-pin'];
  // Load generator and upstream share CPU 0; the proxy under test gets CPU 1 (docs/performance.md#measurement-conditions).
  const loadCpus = pinning ? '0' : null;
  const proxyCpus = pinning ? '1' : null;
  const options = { seconds: Number(values.seconds), warmupSeconds: Number(values.warmup), loadCpus };
  const rate = Number(values.rate);
  const repetitions = Number(values.reps);
  const wanted = new Set(values.only.split(','));
  const scenarios: Scenario[] = [
    { name: 'json c=8', stream: false, connections: 8 }, { name: 'json c=64', stream: false, connections: 64 }, { name: 'json paced', stream: false, rate },
    { name: 'stream c=8', stream: true, connections: 8 }, { name: 'stream c=64', stream: true, connections: 64 }, { name: 'stream paced', stream: true, rate },
  ].filter((scenario) => !values.scenarios || values.scenarios.split(',').includes(scenario.name));
  const notes: string[] = [];
  // Read now: the commit measured is the one checked out when the servers start (others may commit during the run).
  const machine = describeMachine();
  const upstream = await startUpstreamProcess(loadCpus);
  cleanups.push(() => upstream.stop());
  const targets: Target[] = [];
  const runs: RunResult[] = [];
  const relayRuns: RunResult[] = [];
  const parts: Record<string, unknown> = {};
  const relayOptions = { ...options, seconds: values['relay-seconds'] !== undefined ? Number(values['relay-seconds']) : options.seconds / 2 };
  const relayProfile = values['relay-profile'] ? path.resolve(values['relay-profile']) : null;
  /** 1-minute load average before and after the relay part: other work on the machine shows up in both targets. */
  const relayLoad: number[] = [];
  try {
    if (wanted.has('direct')) targets.push(directTarget(upstream));
    if (wanted.has('nginx')) {
      const nginx = await nginxTarget(upstream, proxyCpus);
      if (nginx) {
        targets.push(nginx);
        cleanups.push(() => nginx.stop());
      } else notes.push('nginx is not installed (apt-get install nginx): its rows are missing.');
    }
    if (wanted.has('koa')) {
      const koa = await koaTarget(upstream, proxyCpus);
      targets.push(koa);
      cleanups.push(() => koa.stop());
    }
    if (wanted.has('floor')) {
      const floor = await floorTarget(upstream, proxyCpus);
      targets.push(floor);
      cleanups.push(() => floor.stop());
    }
    if (wanted.has('ours') || wanted.has('root')) {
      const ours = await oursTarget(upstream, proxyCpus, (stop) => cleanups.push(stop));
      if (wanted.has('ours')) targets.push(ours);
      if (wanted.has('root')) targets.push(workspaceRootTarget(ours));
    }
    for (const target of targets) await warmUp(target, Number(values['first-warmup']), loadCpus);
    for (let repetition = 1; repetition <= repetitions && targets.length; repetition++) {
      for (const scenario of scenarios) {
        for (const target of targets) {
          const result = await measure(target, scenario, repetition, options);
          runs.push(result);
          console.log(`[${repetition}/${repetitions}] ${scenario.name.padEnd(13)} ${target.name.padEnd(6)} ${result.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms  cpu ${JSON.stringify(result.cpuMicrosPerRequest)}`);
        }
      }
    }
    const ours = targets.find((target) => target.name === 'ours');
    if (ours && !values['no-parts']) {
      const short = await measure(ours, { name: 'relay 20', stream: true, connections: 8, chunks: 20 }, 0, options);
      const long = await measure(ours, { name: 'relay 200', stream: true, connections: 8, chunks: 200 }, 0, options);
      parts.chunkRelayMicrosPerChunk = Object.fromEntries(['gateway', 'agent'].map((role) =>
        [role, Math.round(((long.cpuMicrosPerRequest[role] - short.cpuMicrosPerRequest[role]) / 180) * 10) / 10]));
      parts.relayRuns = [short, long];
    }
    // The lone server goes before the relay pair starts: an idle server beside it would be noise.
    for (const target of targets) await target.stop();

    if (wanted.has('relay')) {
      if (relayProfile) fs.mkdirSync(relayProfile, { recursive: true });
      relayLoad.push(os.loadavg()[0]);
      const pair = await startRelayPair(upstream, proxyCpus, (stop) => cleanups.push(stop), {
        nodeArgsA: relayProfile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(relayProfile, 'A')}`] : [],
        nodeArgsB: relayProfile ? ['--cpu-prof', `--cpu-prof-dir=${path.join(relayProfile, 'B')}`] : [],
      });
      for (let repetition = 1; repetition <= repetitions; repetition++) {
        for (const scenario of scenarios) {
          // A/B interleaved, the order alternating by repetition (neither always runs second, on a warmer machine).
          const order = repetition % 2 ? [pair.direct, pair.relayed] : [pair.relayed, pair.direct];
          for (const target of order) {
            const result = await measure(target, scenario, repetition, relayOptions);
            relayRuns.push(result);
            console.log(`[relay ${repetition}/${repetitions}] ${scenario.name.padEnd(13)} ${target.name.padEnd(4)} ${result.requestsPerSecond.toFixed(0).padStart(6)} req/s  p50 ${result.p50Ms.toFixed(2)} ms  p99 ${result.p99Ms.toFixed(2)} ms${result.ttfbP50Ms === null ? '' : `  ttfb ${result.ttfbP50Ms.toFixed(2)} ms`}  cpu ${JSON.stringify(result.cpuMicrosPerRequest)}  failed ${result.failed}`);
          }
        }
      }
      relayLoad.push(os.loadavg()[0]);
      await pair.stop();
    }
  } finally {
    await stopAll();
  }
  if (!values['no-parts'] && targets.length) parts.grpcFrames = await measureGrpcFrames(Number(values.seconds) / 2);
  const stamp = `${new Date().toISOString().slice(0, 10)}-${machine.gitSha}`;
  const allOptions = { ...options, rate, pinning, reps: repetitions };
  const relayName = relayRuns.length ? writeRelayResults(relayRuns, machine, stamp, { ...relayOptions, rate, pinning, reps: repetitions, profiled: relayProfile !== null, loadAverage: relayLoad }) : null;
  if (runs.length) writeResults(runs, parts, notes, allOptions, machine, stamp, relayName);
}

/** Writes the relay comparison; the name it was written under (numbered if taken: freshResultName). */
function writeRelayResults(runs: RunResult[], machine: Record<string, string | number>, stamp: string, options: Record<string, unknown>): string {
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.mkdirSync(directory, { recursive: true });
  const name = freshResultName(directory, `${stamp.replace(/-([^-]+)$/, '-relay-$1')}${options.pinning ? '' : '-no-pin'}`);
  fs.writeFileSync(path.join(directory, `${name}.json`), JSON.stringify({ machine, options, summaries: summarize(runs, 'A'), runs }, null, 2));
  const markdown = relayMarkdown(runs, machine, name, options);
  fs.writeFileSync(path.join(directory, `${name}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${name}.{json,md}`);
  return name;
}

function writeResults(runs: RunResult[], parts: Record<string, unknown>, notes: string[], options: Record<string, unknown>, machine: Record<string, string | number>, day: string, relayName: string | null): void {
  const summaries = summarize(runs);
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.mkdirSync(directory, { recursive: true });
  const stamp = freshResultName(directory, day);
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify({ machine, options, notes, summaries, parts, runs }, null, 2));
  const relay = parts.chunkRelayMicrosPerChunk as Record<string, number> | undefined;
  const frames = parts.grpcFrames as Record<string, number> | undefined;
  const markdown = [
    `# Benchmark ${stamp}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ${machine.wrk}; ${machine.nginx}.`,
    `Method: ${options.reps} interleaved repetitions (direct, nginx, koa, ours in turn), medians; ${options.seconds} s per run after ${options.warmupSeconds} s warm-up; paced runs at ${options.rate} req/s; `
      + (options.pinning ? 'load generator and upstream pinned to CPU 0, the proxy under test (nginx, the bare Koa proxy, or gateway + agent + PostgreSQL) to CPU 1.' : 'no CPU pinning.'),
    'CPU µs/request is utime+stime from /proc over the measured run divided by completed requests. "added" is ours/nginx minus direct in the same repetition.',
    ...notes.map((note) => `Note: ${note}`), '',
    '## Targets', '', targetsCheck(summaries), '',
    ...(floorBreakdown(summaries) ? ['### Where the CPU goes (issue 24)', '', floorBreakdown(summaries), ''] : []),
    '## Results', '', markdownTables(summaries),
    '## Parts', '',
    relay ? `Relay cost per streamed chunk (200- vs 20-chunk streams at c=8): gateway ${relay.gateway} µs, agent ${relay.agent} µs.` : '',
    frames ? `gRPC frames/s over worker.v1 between two processes (60-byte chunks): ${Object.entries(frames).map(([name, value]) => `${name} ${value.toLocaleString('en-US')}`).join('; ')}.` : '',
    relayName ? `\nRelay between servers (client → B → A against client → A): \`${relayName}.md\`.` : '',
    '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  fs.writeFileSync(path.join(directory, 'latest.md'), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${stamp}.{json,md} and bench/results/latest.md`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
