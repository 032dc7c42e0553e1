/**
 * `npm run bench:rollups` (issue 37): what the minute rollups and the request log cost the
 * server's process at 2,000 requests a second.
 *
 * Two measures, both against a real PostgreSQL (BENCH_DATABASE_URL, an admin URL; a scratch
 * database is made and dropped):
 * - paced: a child process builds a realistic FinishedRequest 2,000 times a second (as the
 *   WorkTicket does for every request) and hands it to the pipeline's RequestObservers with no
 *   observer (baseline), the rollups (MinuteRollups + RollupWriter), the request log
 *   (RequestLogRecorder), or both; its process CPU (user + system, getrusage) over the run,
 *   flushes to the database included. Variants run interleaved, medians reported.
 * - parts: the observers' per-request cost (ns per call over a million calls) and one flush's
 *   CPU (a minute of rollups for 20 deployments; a second of log entries); and PostgreSQL's CPU
 *   per request log row, as migrated and with the workspace foreign key it had before (read
 *   from /proc, so only with PostgreSQL on this machine).
 *
 * Flags: --seconds 20 --warmup 3 --reps 3 --rate 2000 --rollup-flush-ms 10000
 * (the rollups write once a minute in production; the paced runs write every 10 s, so the
 * flush's share there is six times what it is, an upper bound).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from 'pg';
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource, openDatabase } from '../control-plane/data-source';
import { RequestObservers, type FinishedRequest } from '../control-plane/pipeline/finished-request';
import { MinuteRollups } from '../control-plane/metrics-history/minute-rollups';
import { RollupWriter } from '../control-plane/metrics-history/rollup-writer';
import { RequestLogRecorder } from '../control-plane/request-log/request-log-recorder';
import { FinishedRequests } from './finished-requests';
import { describeMachine } from './machine';
import { freshResultName } from './report';

const VARIANTS = ['baseline', 'rollups', 'log', 'both'] as const;
type Variant = typeof VARIANTS[number];
const DEPLOYMENTS = 20;
const WORKSPACE = 'ws_bench_rollups';

interface Options { seconds: number; warmup: number; reps: number; rate: number; rollupFlushMs: number }

function flag(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? Number(process.argv[index + 1]) : fallback;
}

const silent = pino({ level: 'silent' });
const cpuMs = () => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1_000;
};

/** Child: one paced run of `variant`; prints its CPU as JSON. */
async function pacedChild(url: string, variant: Variant, options: Options): Promise<void> {
  const dataSource = createDataSource(url);
  await dataSource.initialize();
  const observers = new RequestObservers();
  const rollups = new MinuteRollups();
  const writer = new RollupWriter(dataSource, rollups, options.rollupFlushMs, silent);
  const log = new RequestLogRecorder(dataSource, 1_000, silent);
  if (variant === 'rollups' || variant === 'both') {
    observers.add(rollups);
    writer.start();
  }
  if (variant === 'log' || variant === 'both') observers.add(log);
  const records = new FinishedRequests(WORKSPACE, DEPLOYMENTS);
  const started = Date.now();
  let sent = 0;
  let measuredFrom = 0;
  let cpuAtStart = 0;
  const totalMs = (options.warmup + options.seconds) * 1_000;
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      const now = Date.now();
      const elapsed = now - started;
      if (!measuredFrom && elapsed >= options.warmup * 1_000) {
        measuredFrom = now;
        cpuAtStart = cpuMs();
      }
      const due = Math.floor((Math.min(elapsed, totalMs) / 1_000) * options.rate);
      for (; sent < due; sent++) observers.requestFinished(records.next(now));
      if (elapsed >= totalMs) {
        clearInterval(timer);
        resolve();
      }
    }, 5);
  });
  const measuredMs = Date.now() - measuredFrom;
  const cpu = cpuMs() - cpuAtStart;
  await writer.stop();
  await log.stop();
  await dataSource.destroy();
  process.stdout.write(`${JSON.stringify({ variant, cpuMs: cpu, measuredMs, requests: sent })}\n`);
}

/** Child: the observers' per-call cost and one flush's CPU each. */
async function partsChild(url: string): Promise<void> {
  const dataSource = createDataSource(url);
  await dataSource.initialize();
  const records = new FinishedRequests(WORKSPACE, DEPLOYMENTS);
  const now = Date.now();
  const pool = Array.from({ length: 100_000 }, () => records.next(now));
  const perCallNs = (observer: { requestFinished(request: FinishedRequest): void }, calls: number) => {
    const from = process.hrtime.bigint();
    for (let index = 0; index < calls; index++) observer.requestFinished(pool[index % pool.length]);
    return Number(process.hrtime.bigint() - from) / calls;
  };
  const rollups = new MinuteRollups();
  perCallNs(rollups, 200_000); // warm-up
  rollups.take();
  const rollupNs = perCallNs(rollups, 1_000_000);
  // One minute at 2,000 req/s, for 20 deployments: what one production flush writes.
  rollups.take();
  for (let index = 0; index < 120_000; index++) rollups.requestFinished(pool[index % pool.length]);
  rollups.charged(Array.from({ length: DEPLOYMENTS }, (_, index) => ({ deploymentId: `dep_bench_${index}`, amount: 0.05 })));
  const writer = new RollupWriter(dataSource, rollups, 60_000, silent);
  const flushes: number[] = [];
  for (let rep = 0; rep < 5; rep++) {
    if (rep > 0) for (let index = 0; index < 120_000; index++) rollups.requestFinished(pool[index % pool.length]);
    const before = cpuMs();
    await writer.flush();
    flushes.push(cpuMs() - before);
  }
  // The log's push, then one second's batch (2,000 entries) written.
  const log = new RequestLogRecorder(dataSource, 3_600_000, silent);
  const logNs = perCallNs(log, 50_000);
  await log.flush();
  const logFlushes: number[] = [];
  for (let rep = 0; rep < 10; rep++) {
    for (let index = 0; index < 2_000; index++) log.requestFinished(pool[index]);
    const before = cpuMs();
    await log.flush();
    logFlushes.push(cpuMs() - before);
  }
  // Bodies on: 2 KiB of request and of answer per entry.
  const content = { request: Buffer.alloc(2_048, 'a'), requestTruncated: false, response: Buffer.alloc(2_048, 'b'), responseTruncated: false };
  const bodyFlushes: number[] = [];
  for (let rep = 0; rep < 5; rep++) {
    for (let index = 0; index < 2_000; index++) log.requestFinished({ ...pool[index], content });
    const before = cpuMs();
    await log.flush();
    bodyFlushes.push(cpuMs() - before);
  }
  const logRowDatabaseUs = await logRowDatabaseCost(dataSource, log, pool);
  await dataSource.destroy();
  process.stdout.write(`${JSON.stringify({ rollupNs, rollupFlushMs: median(flushes), logNs, logFlushMs: median(logFlushes), logBodyFlushMs: median(bodyFlushes), logRowDatabaseUs })}\n`);
}

/**
 * PostgreSQL's CPU per request log row (µs, median of 10 rounds of 10,000 rows), as migrated and
 * with the workspace foreign key the table had until migration 1765830000000, interleaved; read
 * from /proc of the database's backends, so null when PostgreSQL runs on another machine.
 */
async function logRowDatabaseCost(dataSource: DataSource, log: RequestLogRecorder, pool: FinishedRequest[]): Promise<Record<string, number> | null> {
  const backendCpuMs = async (): Promise<number | null> => {
    const backends: Array<{ pid: number }> = await dataSource.query('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
    let ticks = 0;
    for (const { pid } of backends) {
      try {
        const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
        ticks += Number(fields[11]) + Number(fields[12]);
      } catch {
        return null;
      }
    }
    return ticks * 10; // USER_HZ is 100 on Linux
  };
  const variants: Record<string, { setUp: string; tearDown: string; rounds: number[] }> = {
    'as migrated': { setUp: '', tearDown: '', rounds: [] },
    'with the workspace foreign key': {
      setUp: 'ALTER TABLE request_log ADD CONSTRAINT bench_workspace_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE NOT VALID',
      tearDown: 'ALTER TABLE request_log DROP CONSTRAINT bench_workspace_fkey', rounds: [],
    },
  };
  const ROWS = 10_000;
  for (let round = 0; round < 10; round++) {
    for (const variant of Object.values(variants)) {
      if (variant.setUp) await dataSource.query(variant.setUp);
      const before = await backendCpuMs();
      for (let index = 0; index < ROWS; index++) log.requestFinished({ ...pool[index % pool.length], requestId: `req_db_${round}_${index}`, content: undefined });
      await log.flush();
      const after = await backendCpuMs();
      if (variant.tearDown) await dataSource.query(variant.tearDown);
      if (before === null || after === null) return null;
      variant.rounds.push(((after - before) * 1_000) / ROWS);
    }
  }
  return Object.fromEntries(Object.entries(variants).map(([name, variant]) => [name, median(variant.rounds)]));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

function runChild(args: string[]): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [__filename, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(output.trim().split('\n').pop()!)) : reject(new Error(`child ${args.join(' ')} exited ${code}`))));
  });
}

async function main(): Promise<void> {
  const role = process.argv[2];
  const childUrl = process.argv[3];
  const options: Options = {
    seconds: flag('seconds', 20), warmup: flag('warmup', 3), reps: flag('reps', 3), rate: flag('rate', 2_000), rollupFlushMs: flag('rollup-flush-ms', 10_000),
  };
  if (role === 'paced') return await pacedChild(childUrl, process.argv[4] as Variant, options);
  if (role === 'parts') return await partsChild(childUrl);

  const adminUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `bench_rollups_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = Object.assign(new URL(adminUrl), { pathname: `/${name}` }).toString();
  try {
    const setup: DataSource = await openDatabase(url);
    await setup.query(`INSERT INTO workspaces (id, name) VALUES ($1, 'bench')`, [WORKSPACE]);
    await setup.destroy();
    const passedOn = process.argv.slice(2);
    const parts = await runChild(['parts', url]);
    console.log('parts', parts);
    const runs: Record<Variant, Array<{ cpuMs: number; measuredMs: number; requests: number }>> = { baseline: [], rollups: [], log: [], both: [] };
    for (let rep = 0; rep < options.reps; rep++) {
      for (const variant of VARIANTS) {
        const run = await runChild(['paced', url, variant, ...passedOn]);
        runs[variant].push(run);
        console.log(`rep ${rep + 1} ${variant}: ${(run.cpuMs / run.measuredMs * 100).toFixed(2)} % of a core`);
      }
    }
    const share = (variant: Variant) => median(runs[variant].map((run) => (run.cpuMs / run.measuredMs) * 100));
    const report = {
      when: new Date().toISOString(), machine: describeMachine(), options, parts,
      pacedPercentOfCore: Object.fromEntries(VARIANTS.map((variant) => [variant, share(variant)])),
      pacedRuns: runs,
      estimate: {
        rollupsPercentOfCore: ((parts.rollupNs * options.rate) / 1e9) * 100 + (parts.rollupFlushMs / 60_000) * 100,
        logPercentOfCore: ((parts.logNs * options.rate) / 1e9) * 100 + (parts.logFlushMs * (options.rate / 2_000)) / 10,
      },
    };
    const directory = path.join(__dirname, '../../bench/results');
    const out = path.join(directory, `${freshResultName(directory, `rollups-${new Date().toISOString().slice(0, 10)}-${gitSha()}`)}.json`);
    fs.writeFileSync(out, `${JSON.stringify(report, null, 2)}\n`);
    console.log(JSON.stringify({ pacedPercentOfCore: report.pacedPercentOfCore, estimate: report.estimate }, null, 2));
    console.log(`written: ${out}`);
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
  }
}

function gitSha(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD']).toString().trim();
  } catch {
    return 'unknown';
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
