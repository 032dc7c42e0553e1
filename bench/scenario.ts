/** One measured run: a load shape against a target, with the CPU each process spent on it. */
import path from 'node:path';
import { cpuMicros, rssBytes, run } from './processes';
import type { PacedResult } from './paced-client';
import type { Target } from './targets';

export interface Scenario {
  readonly name: string;
  readonly stream: boolean;
  /** Closed loop with this many connections, or open loop at `rate`. */
  readonly connections?: number;
  readonly rate?: number;
  readonly chunks?: number;
}

export interface RunResult {
  scenario: string;
  target: string;
  repetition: number;
  requests: number;
  failed: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  ttfbP50Ms: number | null;
  ttfbP99Ms: number | null;
  /** CPU microseconds per completed request, by process role. */
  cpuMicrosPerRequest: Record<string, number>;
  /** CPU microseconds over the measured run, by process role (not rounded: background costs are a fraction of a µs per request). */
  cpuMicros: Record<string, number>;
  rssMiB: Record<string, number>;
}

export interface RunOptions {
  seconds: number;
  warmupSeconds: number;
  loadCpus: string | null;
}

const WRK_SCRIPT = path.resolve(__dirname, '../../bench/wrk-report.lua');

/** Drives `scenario` against `target`: a warm-up, then the measured run between two CPU readings. */
/**
 * Load once before the first repetition, unmeasured: a process that just started has not
 * compiled its hot path yet. Our server (far more code than the Koa proxy) cost 290–300 µs per
 * JSON request in its first 10 s run and 200–210 µs in its third, which skewed medians of 3.
 */
export async function warmUp(target: Target, seconds: number, cpus: string | null): Promise<void> {
  await drive(target, { name: 'warm-up', stream: false, connections: 8 }, seconds / 2, cpus);
  await drive(target, { name: 'warm-up', stream: true, connections: 8 }, seconds / 2, cpus);
}

export async function measure(target: Target, scenario: Scenario, repetition: number, options: RunOptions): Promise<RunResult> {
  await drive(target, scenario, options.warmupSeconds, options.loadCpus);
  const roles = target.processes();
  const before = readCpu(roles);
  const load = await drive(target, scenario, options.seconds, options.loadCpus);
  const after = readCpu(roles);
  const cpuMicrosPerRequest: Record<string, number> = {};
  const cpuMicrosTotal: Record<string, number> = {};
  const rssMiB: Record<string, number> = {};
  for (const role of Object.keys(roles)) {
    // Per process, and only processes still alive at the end (a PostgreSQL backend may exit).
    const spent = roles[role].reduce((sum, pid) => sum + (after[pid] > 0 ? after[pid] - before[pid] : 0), 0);
    cpuMicrosTotal[role] = spent;
    cpuMicrosPerRequest[role] = Math.round(spent / Math.max(1, load.requests));
    rssMiB[role] = Math.round(roles[role].reduce((sum, pid) => sum + rssBytes(pid), 0) / 1024 / 102.4) / 10;
  }
  return { scenario: scenario.name, target: target.name, repetition, ...load, cpuMicrosPerRequest, cpuMicros: cpuMicrosTotal, rssMiB };
}

function readCpu(roles: Record<string, number[]>): Record<number, number> {
  return Object.fromEntries(Object.values(roles).flat().map((pid) => [pid, cpuMicros(pid)]));
}

type Load = Pick<RunResult, 'requests' | 'failed' | 'requestsPerSecond' | 'p50Ms' | 'p99Ms' | 'ttfbP50Ms' | 'ttfbP99Ms'>;

async function drive(target: Target, scenario: Scenario, seconds: number, cpus: string | null): Promise<Load> {
  if (scenario.rate) {
    const args = [path.join(__dirname, 'paced-client.js'), target.url, '--rate', String(scenario.rate), '--seconds', String(seconds), '--key', target.key, '--chunks', String(scenario.chunks ?? 20)];
    if (scenario.stream) args.push('--stream');
    const result = JSON.parse(await run(cpus, process.execPath, args)) as PacedResult;
    return {
      requests: result.completed, failed: result.failed, requestsPerSecond: result.rate, p50Ms: result.p50Ms, p99Ms: result.p99Ms,
      ttfbP50Ms: scenario.stream ? result.ttfbP50Ms : null, ttfbP99Ms: scenario.stream ? result.ttfbP99Ms : null,
    };
  }
  const env = { ...process.env, BENCH_KEY: target.key, BENCH_STREAM: scenario.stream ? '1' : '0', BENCH_CHUNKS: String(scenario.chunks ?? 20) };
  // wrk takes whole seconds only (an odd --first-warmup halved was "1.5s": wrk printed its usage and exited 1).
  const output = await run(cpus, 'wrk', ['-t1', `-c${scenario.connections}`, `-d${Math.max(1, Math.round(seconds))}s`, '--latency', '-s', WRK_SCRIPT, target.url], env);
  const line = output.split('\n').find((entry) => entry.startsWith('{"requests"'));
  if (!line) throw new Error(`wrk printed no result: ${output.slice(-300)}`);
  const result = JSON.parse(line) as { requests: number; duration_us: number; non2xx: number; socket_errors: number; p50_us: number; p99_us: number };
  return {
    requests: result.requests - result.non2xx, failed: result.non2xx + result.socket_errors,
    requestsPerSecond: (result.requests - result.non2xx) / (result.duration_us / 1e6),
    p50Ms: result.p50_us / 1000, p99Ms: result.p99_us / 1000, ttfbP50Ms: null, ttfbP99Ms: null,
  };
}
