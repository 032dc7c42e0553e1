/**
 * `npm run bench`: direct vs nginx vs ours, interleaved (A, B, C, A, B, C, …), medians of the
 * repetitions, for JSON and 20-chunk streams at c=8, c=64 and a paced rate; then the parts
 * (gRPC frames/s, relay cost per streamed chunk). Results go to bench/results/.
 * Flags: --seconds 10 --warmup 2 --reps 3 --rate 500 --no-pin --only direct,nginx,ours --no-parts
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { measureGrpcFrames } from './grpc-frames';
import { describeMachine } from './machine';
import { hasCommand } from './processes';
import { markdownTables, summarize, targetsCheck } from './report';
import { measure, type RunResult, type Scenario } from './scenario';
import { directTarget, nginxTarget, oursTarget, PROJECT_ROOT, startUpstreamProcess, type Target } from './targets';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '10' }, warmup: { type: 'string', default: '2' }, reps: { type: 'string', default: '3' },
      rate: { type: 'string', default: '500' }, 'no-pin': { type: 'boolean', default: false }, only: { type: 'string', default: 'direct,nginx,ours' },
      'no-parts': { type: 'boolean', default: false },
    },
  });
  if (!hasCommand('wrk')) throw new Error('wrk is not installed: apt-get install wrk');
  const pinning = !values['no-pin'];
  // Load generator and upstream share CPU 0; the proxy under test gets CPU 1 (PERF-NOTES.md).
  const loadCpus = pinning ? '0' : null;
  const proxyCpus = pinning ? '1' : null;
  const options = { seconds: Number(values.seconds), warmupSeconds: Number(values.warmup), loadCpus };
  const rate = Number(values.rate);
  const wanted = new Set(values.only.split(','));
  const scenarios: Scenario[] = [
    { name: 'json c=8', stream: false, connections: 8 }, { name: 'json c=64', stream: false, connections: 64 }, { name: 'json paced', stream: false, rate },
    { name: 'stream c=8', stream: true, connections: 8 }, { name: 'stream c=64', stream: true, connections: 64 }, { name: 'stream paced', stream: true, rate },
  ];
  const notes: string[] = [];
  const upstream = await startUpstreamProcess(loadCpus);
  const targets: Target[] = [];
  const runs: RunResult[] = [];
  const parts: Record<string, unknown> = {};
  try {
    if (wanted.has('direct')) targets.push(directTarget(upstream));
    if (wanted.has('nginx')) {
      const nginx = await nginxTarget(upstream, proxyCpus);
      if (nginx) targets.push(nginx);
      else notes.push('nginx is not installed (apt-get install nginx): its rows are missing.');
    }
    if (wanted.has('ours')) targets.push(await oursTarget(upstream, proxyCpus));
    const repetitions = Number(values.reps);
    for (let repetition = 1; repetition <= repetitions; repetition++) {
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
  } finally {
    for (const target of targets) await target.stop();
    await upstream.stop();
  }
  if (!values['no-parts']) parts.grpcFrames = await measureGrpcFrames(Number(values.seconds) / 2);
  writeResults(runs, parts, notes, { ...options, rate, pinning, reps: Number(values.reps) });
}

function writeResults(runs: RunResult[], parts: Record<string, unknown>, notes: string[], options: Record<string, unknown>): void {
  const machine = describeMachine();
  const summaries = summarize(runs);
  const stamp = `${new Date().toISOString().slice(0, 10)}-${machine.gitSha}`;
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify({ machine, options, notes, summaries, parts, runs }, null, 2));
  const relay = parts.chunkRelayMicrosPerChunk as Record<string, number> | undefined;
  const frames = parts.grpcFrames as Record<string, number> | undefined;
  const markdown = [
    `# Benchmark ${stamp}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; ${machine.wrk}; ${machine.nginx}.`,
    `Method: ${options.reps} interleaved repetitions (direct, nginx, ours in turn), medians; ${options.seconds} s per run after ${options.warmupSeconds} s warm-up; paced runs at ${options.rate} req/s; `
      + (options.pinning ? 'load generator and upstream pinned to CPU 0, the proxy under test (nginx, or gateway + agent + PostgreSQL) to CPU 1.' : 'no CPU pinning.'),
    'CPU µs/request is utime+stime from /proc over the measured run divided by completed requests. "added" is ours/nginx minus direct in the same repetition.',
    ...notes.map((note) => `Note: ${note}`), '',
    '## Targets', '', targetsCheck(summaries), '',
    '## Results', '', markdownTables(summaries),
    '## Parts', '',
    relay ? `Relay cost per streamed chunk (200- vs 20-chunk streams at c=8): gateway ${relay.gateway} µs, agent ${relay.agent} µs.` : '',
    frames ? `gRPC frames/s over worker.v1 between two processes (60-byte chunks): ${Object.entries(frames).map(([name, value]) => `${name} ${value.toLocaleString('en-US')}`).join('; ')}.` : '',
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
