/**
 * `npm run bench:start`: how long `npm start` takes to its first answer when nothing changed
 * since the last build (issue 36's target: under 3 s), on the embedded PostgreSQL (the
 * default: its first start runs initdb and is not counted) and on an external one
 * (BENCH_DATABASE_URL, else skipped). Each start: spawn `npm start` → first `/healthz` 200 and
 * first `/readyz` 200, then SIGTERM to npm and the time until the whole tree is gone.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort } from '../control-plane/database/embedded-database';
import { describeMachine } from './machine';
import { median, saveResults } from './report';

const ROOT = path.resolve(__dirname, '..');
const STARTS = Number(process.env.BENCH_STARTS ?? 5);

interface Start {
  readonly healthzMs: number;
  readonly readyzMs: number;
  readonly stopMs: number;
}

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const startedAt = performance.now();
  for (;;) {
    if (await check().catch(() => false)) return performance.now() - startedAt;
    if (performance.now() - startedAt > timeoutMs) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function oneStart(env: Record<string, string>): Promise<Start> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const startedAt = performance.now();
  const npm = spawn('npm', ['start'], {
    cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'],
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), GRPC_PORT: '0', LOG_LEVEL: 'warn', ...env },
  });
  const exited = new Promise((resolve) => npm.once('exit', resolve));
  const healthzMs = await until(async () => (await fetch(`${url}/healthz`)).status === 200, 120_000);
  const readyzMs = await until(async () => (await fetch(`${url}/readyz`)).status === 200, 120_000) + healthzMs;
  void startedAt;
  const stoppingAt = performance.now();
  npm.kill('SIGTERM');
  await exited;
  const stopMs = await until(async () => {
    try {
      await fetch(`${url}/healthz`);
      return false;
    } catch {
      return true;
    }
  }, 60_000) + (performance.now() - stoppingAt);
  return { healthzMs, readyzMs, stopMs };
}

async function series(name: string, env: Record<string, string>): Promise<{ name: string; starts: Start[] }> {
  // The first start of a DATA_DIR initialises it (initdb, migrations, the first run): not what a restart costs.
  await oneStart(env);
  const starts: Start[] = [];
  for (let index = 0; index < STARTS; index++) starts.push(await oneStart(env));
  return { name, starts };
}

async function main(): Promise<void> {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-start-'));
  fs.chmodSync(dataDir, 0o755);
  const results = [await series('embedded PostgreSQL', { DATA_DIR: dataDir })];
  if (process.env.BENCH_DATABASE_URL) results.push(await series('external PostgreSQL', { DATA_DIR: dataDir, DATABASE_URL: process.env.BENCH_DATABASE_URL }));
  fs.rmSync(dataDir, { recursive: true, force: true });
  const rows = results.map(({ name, starts }) => {
    const of = (pick: (start: Start) => number) => `${(median(starts.map(pick)) / 1000).toFixed(2)} s (${starts.map((start) => (pick(start) / 1000).toFixed(2)).join(', ')})`;
    return `| ${name} | ${of((start) => start.healthzMs)} | ${of((start) => start.readyzMs)} | ${of((start) => start.stopMs)} |`;
  });
  const machine = describeMachine();
  const markdown = [
    `# npm start: a second start, nothing rebuilt (${new Date().toISOString().slice(0, 10)}, ${machine.gitSha})`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}. ${STARTS} starts after one that initialised DATA_DIR; median (each start).`, '',
    '| database | first answer (/healthz 200) | ready (/readyz 200) | SIGTERM to npm → port closed |', '| --- | --- | --- | --- |', ...rows, '',
    'Target (issue 36): first answer under 3 s.',
  ].join('\n');
  process.stdout.write(`${markdown}\n`);
  saveResults(`start-${new Date().toISOString().slice(0, 10)}-${machine.gitSha}`, { machine, results }, markdown);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
