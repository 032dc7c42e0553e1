/**
 * `node dist/bench/request-observers.js [--checkout DIR]`: what each request pays, with tracing
 * off, for what issue 37 and the autoscaler's signals (issue 39) hear of it: the per-deployment
 * metrics, the minute rollups, the scaling signals and the request log (its row made and
 * serialised at the flush, one flush per 1,000 requests as at 1,000 requests/s and the default
 * 1 s interval). One process feeds each observer the same realistic FinishedRequests
 * (finished-requests.ts, made afresh per request) in alternating rounds and reports CPU µs per
 * request of each and their sum: finer than a whole-server run can resolve on a shared 2-core VM (run-tracing.ts
 * varies ±10 % between repetitions), and the sum is what tracing-off adds beyond its own 0.16 µs
 * (tracing-off-path.ts). `--checkout` times another built checkout's observers (a worktree with
 * node_modules linked), for a before and after. The database is a counterpart that takes the
 * INSERT's text and answers at once: PostgreSQL's own CPU is not the gateway's.
 * Flags: --checkout DIR (default: this one) --requests 200000 --rounds 7
 */
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { FinishedRequest } from '../control-plane/pipeline/finished-request';
import { FinishedRequests } from './finished-requests';
import { median } from './report';
import { PROJECT_ROOT } from './targets';

interface Observer { requestFinished(request: unknown): void }
interface Part { name: string; perRequest(request: FinishedRequest): void; end?(): Promise<void> }

function partsOf(root: string): Part[] {
  const load = (file: string) => require(path.join(root, 'dist', file)); // eslint-disable-line @typescript-eslint/no-require-imports
  const { RequestMetrics } = load('control-plane/telemetry/request-metrics.js');
  const { MinuteRollups } = load('control-plane/metrics-history/minute-rollups.js');
  const { ServerScalingSignals } = load('control-plane/autoscaling/server-scaling-signals.js');
  const { RequestLogRecorder } = load('control-plane/request-log/request-log-recorder.js');
  const { Registry } = require('prom-client'); // eslint-disable-line @typescript-eslint/no-require-imports
  // The pipeline hands the arrivals the deployment row its cache already holds.
  const rows = new Map<string, { id: string; sloTtftP95Ms: number; sloTpotP95Ms: null; sloQueueWaitP95Ms: null }>();
  const deployment = (id: string) => rows.get(id) ?? rows.set(id, { id, sloTtftP95Ms: 500, sloTpotP95Ms: null, sloQueueWaitP95Ms: null }).get(id)!;
  const signals = new ServerScalingSignals({ find: async (id: string) => deployment(id) });
  const rollups = new MinuteRollups((id: string) => signals.sloOf(id));
  const metrics: Observer = new RequestMetrics(new Registry());
  let written = 0;
  const database = { isInitialized: true, query: async (_sql: string, parameters: string[]) => void (written += parameters[0].length) };
  const silent = { error() {}, warn() {} };
  // A long interval: the bench flushes itself every 1,000 requests, so no timer decides when.
  const log = new RequestLogRecorder(database, 3_600_000, silent);
  let sinceFlush = 0;
  return [
    { name: 'nothing', perRequest: () => {} },
    { name: 'metrics', perRequest: (request) => metrics.requestFinished(request) },
    { name: 'minute rollups', perRequest: (request) => { rollups.arrived(request.deploymentId); rollups.requestFinished(request); } },
    { name: 'scaling signals', perRequest: (request) => { signals.arrived(deployment(request.deploymentId)); signals.requestFinished(request); } },
    {
      name: 'request log',
      perRequest: (request) => {
        log.requestFinished(request);
        if (++sinceFlush === 1_000) {
          sinceFlush = 0;
          void log.flush();
        }
      },
      end: async () => {
        await log.flush();
        if (written === 0) throw new Error('the request log wrote nothing');
      },
    },
  ];
}

/** CPU µs per request of making each request and handing it to `part` (the `nothing` part: only making it). */
async function cpuPerRequest(part: Part, requests: number): Promise<number> {
  const made = new FinishedRequests('ws_bench_observers');
  const now = Date.now();
  const before = process.cpuUsage();
  for (let index = 0; index < requests; index++) part.perRequest(made.next(now));
  await part.end?.();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / requests;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { checkout: { type: 'string' }, requests: { type: 'string' }, rounds: { type: 'string' } } });
  const root = path.resolve(values.checkout ?? PROJECT_ROOT);
  const requests = Number(values.requests ?? 200_000);
  const rounds = Number(values.rounds ?? 7);
  const parts = partsOf(root);
  for (const part of parts) await cpuPerRequest(part, 20_000); // warm: compiled before timing
  const samples = new Map<string, number[]>(parts.map((part) => [part.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const part of round % 2 === 0 ? parts : [...parts].reverse()) samples.get(part.name)!.push(await cpuPerRequest(part, requests));
  }
  const nothing = median(samples.get('nothing')!);
  console.log(`Observers of ${root} (${requests} requests × ${rounds} rounds), CPU µs per request beyond making the request (${nothing.toFixed(3)}), median (min–max):`);
  let total = 0;
  for (const [name, values] of samples) {
    if (name === 'nothing') continue;
    const beyond = values.map((value) => value - nothing);
    total += median(beyond);
    console.log(`  ${name.padEnd(16)} ${median(beyond).toFixed(3)} (${Math.min(...beyond).toFixed(3)}–${Math.max(...beyond).toFixed(3)})`);
  }
  console.log(`  ${'sum'.padEnd(16)} ${total.toFixed(3)}`);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
