/**
 * `npm run bench:tracing`: what tracing costs the gateway (issue 37). Three servers, each with
 * its local agent on the benchmark upstream (targets.ts, `ours`), measured interleaved:
 * - `base`: the server of another commit (the one before tracing), built in a worktree of its own
 *   (`git worktree add /tmp/base f021983`, node_modules linked, `npx tsc -p tsconfig.json && node
 *   dist/worker-agent/packaging/build-agent.js --skip-binary` there): `--base /tmp/base`;
 * - `off`: this checkout, tracing off (the default: no OTEL_* exporter);
 * - `on`: this checkout exporting every span (OTEL_TRACES_SAMPLER=always_on) of the server and
 *   its agent to a local OTLP/HTTP receiver (otlp-sink.ts, pinned with the load generator), in
 *   the default protocol (http/protobuf);
 * - `on json`: the same with OTEL_EXPORTER_OTLP_PROTOCOL=http/json (what `on` was before protobuf);
 * - `on 10%`: the same sampling one trace in ten (OTEL_TRACES_SAMPLER=traceidratio, 0.1), what
 *   an operator who finds 100 % too dear would run.
 * Gateway CPU µs per request is the server process's utime + stime over a run divided by its
 * completed requests (scenario.ts); the ratios are taken per repetition against `base` (the four
 * run back to back, in a rotating order) and reported as median and spread. The targets: `off`
 * within 2 % of `base`, `on` within 15 %.
 * Flags: --base DIR (required) --seconds 10 --warmup 2 --reps 5 --first-warmup 10 --no-pin
 *        --targets base,off,on,'on json','on 10%' (a subset: base and one other for a long run of one comparison)
 *        --scenarios 'json c=8,stream c=8,json c=64,json paced,stream paced' (paced: 1,000 requests/s; --rate another)
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeMachine } from './machine';
import { hasCommand, runningCommands, spawnPinned } from './processes';
import { baseRatios, freshResultName, median, medianInterval, percentChange as percent } from './report';
import { measure, warmUp, type RunResult, type Scenario } from './scenario';
import { oursTarget, PROJECT_ROOT, startUpstreamProcess, type Target } from './targets';

const cleanups: Array<() => Promise<void>> = [];
let stopping: Promise<void> | null = null;
const stopAll = () => (stopping ??= (async () => {
  for (const child of runningCommands) child.kill('SIGKILL');
  for (const stop of cleanups.splice(0).reverse()) await stop().catch((error) => console.error('stopping failed:', error));
})());
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => void stopAll().finally(() => process.exit(130)));
}

/**
 * Closed loops (wrk) and open loops at a fixed rate (paced-client.ts). In a closed loop a server
 * that spends more per request also answers fewer per second, and fewer requests per event-loop
 * turn cost more each (less is batched per read, write and gRPC frame); at a fixed rate all three
 * get the same load, so the difference is what tracing itself costs.
 */
const SCENARIOS: Scenario[] = [
  { name: 'json c=8', stream: false, connections: 8 },
  { name: 'stream c=8', stream: true, connections: 8 },
  { name: 'json c=64', stream: false, connections: 64 },
  { name: 'json paced', stream: false, rate: 1_000 },
  { name: 'stream paced', stream: true, rate: 1_000 },
];

interface SinkStats { exports: number; spans: number; bytes: number }

const CALIBRATION_REQUESTS = 200;

/** One chat request (half of them streamed), read to its end. */
async function chat(target: Target, stream: boolean): Promise<void> {
  const response = await fetch(target.url, {
    method: 'POST', headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'hello' }], stream }),
  });
  await response.arrayBuffer();
}

/** The local trace backend, in its own process (its CPU is not the server's). */
async function startSink(cpus: string | null): Promise<{ url: string; stats(): Promise<SinkStats>; stop(): Promise<void> }> {
  const child = spawnPinned(cpus, process.execPath, [path.join(__dirname, 'otlp-sink.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (line: Buffer) => resolve(Number(line.toString().trim())));
    child.once('exit', (code) => reject(new Error(`the OTLP sink exited (${code})`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    stats: async () => (await (await fetch(`${url}/stats`)).json()) as SinkStats,
    stop: async () => void child.kill('SIGTERM'),
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      base: { type: 'string' }, seconds: { type: 'string', default: '10' }, warmup: { type: 'string', default: '2' }, reps: { type: 'string', default: '5' },
      'first-warmup': { type: 'string', default: '10' }, 'no-pin': { type: 'boolean', default: false }, scenarios: { type: 'string' }, rate: { type: 'string' },
      targets: { type: 'string', default: 'base,off,on,on json,on 10%' },
    },
  });
  if (!values.base) throw new Error('--base DIR is required: a built checkout of the commit to compare with (see the comment at the top of bench/run-tracing.ts)');
  const baseRoot = path.resolve(values.base);
  if (!fs.existsSync(path.join(baseRoot, 'dist/gateway/main.js'))) throw new Error(`${baseRoot}/dist/gateway/main.js is missing: build that checkout first`);
  if (!hasCommand('wrk')) throw new Error('wrk is not installed: apt-get install wrk');
  const pinning = !values['no-pin'];
  const loadCpus = pinning ? '0' : null;
  const serverCpus = pinning ? '1' : null;
  const options = { seconds: Number(values.seconds), warmupSeconds: Number(values.warmup), loadCpus };
  const scenarios = SCENARIOS.filter((scenario) => !values.scenarios || values.scenarios.split(',').includes(scenario.name))
    .map((scenario) => (scenario.rate && values.rate ? { ...scenario, rate: Number(values.rate) } : scenario));
  const repetitions = Number(values.reps);
  const machine = describeMachine();
  const baseSha = gitSha(baseRoot);
  const runs: RunResult[] = [];
  /** Spans the receiver got for CALIBRATION_REQUESTS requests to `on`. */
  const spansPerRequest: number[] = [];
  const load: number[] = [os.loadavg()[0]];
  try {
    const upstream = await startUpstreamProcess(loadCpus);
    cleanups.push(() => upstream.stop());
    // One receiver per traced server: the spans counted for `on` are its own.
    const sink = await startSink(loadCpus);
    cleanups.push(() => sink.stop());
    const sampledSink = await startSink(loadCpus);
    cleanups.push(() => sampledSink.stop());
    const jsonSink = await startSink(loadCpus);
    cleanups.push(() => jsonSink.stop());
    const onStart = (stop: () => Promise<void>) => cleanups.push(stop);
    const wanted = new Set(values.targets.split(','));
    const targets: Target[] = [];
    if (wanted.has('base')) targets.push(await oursTarget(upstream, serverCpus, onStart, { root: baseRoot, name: 'base' }));
    if (wanted.has('off')) targets.push(await oursTarget(upstream, serverCpus, onStart, { name: 'off' }));
    if (wanted.has('on')) {
      targets.push(await oursTarget(upstream, serverCpus, onStart, {
        name: 'on', env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url, OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'bench-server' },
      }));
    }
    if (wanted.has('on json')) {
      targets.push(await oursTarget(upstream, serverCpus, onStart, {
        name: 'on json', env: { OTEL_EXPORTER_OTLP_ENDPOINT: jsonSink.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_TRACES_SAMPLER: 'always_on', OTEL_SERVICE_NAME: 'bench-server-json' },
      }));
    }
    if (wanted.has('on 10%')) {
      targets.push(await oursTarget(upstream, serverCpus, onStart, {
        name: 'on 10%', env: { OTEL_EXPORTER_OTLP_ENDPOINT: sampledSink.url, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1', OTEL_SERVICE_NAME: 'bench-server-sampled' },
      }));
    }
    if (!targets.some((target) => target.name === 'base')) throw new Error('--targets must include base: every ratio is against it');
    for (const target of targets) await warmUp(target, Number(values['first-warmup']), loadCpus);
    for (let repetition = 1; repetition <= repetitions; repetition++) {
      for (const scenario of scenarios) {
        // The order rotates: none of the four always runs first (or last, on a warmer machine).
        const order = targets.map((_, index) => targets[(index + repetition) % targets.length]);
        for (const target of order) {
          const result = await measure(target, scenario, repetition, options);
          runs.push(result);
          console.log(`[${repetition}/${repetitions}] ${scenario.name.padEnd(11)} ${target.name.padEnd(4)} ${result.requestsPerSecond.toFixed(0).padStart(6)} req/s  cpu ${JSON.stringify(result.cpuMicrosPerRequest)}  failed ${result.failed}`);
        }
      }
    }
    load.push(os.loadavg()[0]);
    // What `on` exported: spans per request of a few hundred requests, counted once the batch processor's delay (5 s) has passed.
    const on = targets.find((target) => target.name === 'on');
    if (on) {
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const before = await sink.stats();
      for (let index = 0; index < CALIBRATION_REQUESTS; index++) await chat(on, index % 2 === 1);
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      spansPerRequest.push((await sink.stats()).spans - before.spans);
    }
  } finally {
    await stopAll();
  }
  write(runs, { machine, baseSha, options: { ...options, reps: repetitions, pinning }, spansPerRequest, load });
}

function gitSha(root: string): string {
  try {
    return execFileSync('git', ['-C', root, 'rev-parse', '--short', 'HEAD']).toString().trim();
  } catch {
    return 'unknown';
  }
}

interface Ratio { median: number; min: number; max: number; interval: { low: number; high: number } | null }

/** Per repetition, `target`'s gateway µs over `base`'s in the same scenario (report.ts, baseRatios). */
function ratios(runs: RunResult[], scenario: string, target: string): Ratio {
  const values = baseRatios(runs, scenario, target);
  return { median: median(values), min: Math.min(...values), max: Math.max(...values), interval: medianInterval(values) };
}

function write(runs: RunResult[], context: { machine: Record<string, string | number>; baseSha: string; options: Record<string, unknown>; spansPerRequest: number[]; load: number[] }): void {
  const lines: string[] = [
    `# Tracing benchmark ${new Date().toISOString().slice(0, 10)} (${context.machine.gitSha} against ${context.baseSha})`, '',
    `Machine: ${context.machine.cpu}, ${context.machine.cores} cores; Node ${context.machine.node}; ${context.machine.wrk}. Load average ${context.load.map((value) => value.toFixed(2)).join(' → ')} (before → after).`,
    `Method: ${context.options.reps} repetitions, the servers back to back in a rotating order, ${(context.options as { seconds: number }).seconds} s per run after a warm-up; `
      + (context.options.pinning ? 'load generator, upstream and OTLP receiver on CPU 0, the servers (gateway, agent, PostgreSQL) on CPU 1.' : 'no CPU pinning.'),
    context.spansPerRequest.length ? `\`on\` exported ${(context.spansPerRequest[0] / CALIBRATION_REQUESTS).toFixed(2)} spans per request (server and agent; ${CALIBRATION_REQUESTS} chat requests, half streamed, counted at the receiver).` : '', '',
    '| scenario | target | gateway µs/request (median, min–max) | ÷ base per repetition: median (95 % interval of the median; min to max) | agent µs/request | req/s |', '|---|---|---|---|---:|---:|',
  ];
  for (const scenario of [...new Set(runs.map((run) => run.scenario))]) {
    for (const target of ['base', 'off', 'on', 'on json', 'on 10%']) {
      const mine = runs.filter((run) => run.scenario === scenario && run.target === target);
      if (mine.length === 0) continue;
      const gateway = mine.map((run) => run.cpuMicrosPerRequest.gateway);
      const ratio = target === 'base' ? null : ratios(runs, scenario, target);
      lines.push(`| ${scenario} | ${target} | ${median(gateway).toFixed(0)} (${Math.min(...gateway).toFixed(0)}–${Math.max(...gateway).toFixed(0)}) | `
        + `${ratio ? `${percent(ratio.median)} (${ratio.interval ? `${percent(ratio.interval.low)} to ${percent(ratio.interval.high)}` : 'too few repetitions'}; ${percent(ratio.min)} to ${percent(ratio.max)})` : '–'} | ${median(mine.map((run) => run.cpuMicrosPerRequest.agent)).toFixed(0)} | ${median(mine.map((run) => run.requestsPerSecond)).toFixed(0)} |`);
    }
  }
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.mkdirSync(directory, { recursive: true });
  const stamp = freshResultName(directory, `${new Date().toISOString().slice(0, 10)}-tracing-${context.machine.gitSha}-${[...new Set(runs.map((run) => run.target))].join('-').replace(/[ %]/g, '')}`);
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify({ ...context, runs }, null, 2));
  fs.writeFileSync(path.join(directory, `${stamp}.md`), `${lines.join('\n')}\n`);
  console.log(`\n${lines.join('\n')}\n\nwrote bench/results/${stamp}.{json,md}`);
}

main().catch((error) => {
  console.error(error);
  void stopAll().finally(() => process.exit(1));
});
