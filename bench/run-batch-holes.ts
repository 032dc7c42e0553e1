/**
 * `npm run bench:batch-holes` (issue 33, the Batch API's findings): what a hostile batch file
 * and unread downloads cost everyone else. The server runs in its own process
 * (batch-holes-server.ts: no agents, a fresh database of the PostgreSQL at `--admin-url`, a
 * temporary data directory), so its event loop does only the server's work; `/healthz` is
 * probed from a worker thread (its own event loop: the bench's 100 MB bodies do not delay it),
 * open-loop every `--probe-ms`, each probe timed from when it was due, so a stall shows in full.
 * The server's own event loop delay is recorded too (monitorEventLoopDelay, 1 ms resolution).
 *
 * Phases:
 * - upload-nested: POST /files of `--megabytes` of lines nested 100,000 deep (refused, 400);
 * - validate-nested: the same file placed in storage as one stored before the upload scan
 *   existed, and a batch of it validated (it fails: the scan refuses each line);
 * - revalidate-nested: a second batch of that file (its failure is remembered);
 * - validate-small-lines: a file of `--lines` small valid lines (BATCH_MAX_LINES raised to it)
 *   validated to `in_progress`, then cancelled; the size of its batch_lines rows is reported;
 * - unread-downloads: `--downloads` parallel downloads of that file, none read, for 3 s.
 *
 * Flags: --megabytes 100 --lines 1000000 --downloads 25 --probe-ms 5 --phases a,b,…
 *        --admin-url postgres://postgres@127.0.0.1:5432/postgres
 * Results: bench/results/<date>-batch-holes-<sha>.md
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import { Client } from 'pg';
import type { BatchHolesRequest, BatchHolesStart } from './batch-holes-server';
import { PROJECT_ROOT } from './targets';

const MiB = 1024 * 1024;
const PHASES = ['upload-nested', 'validate-nested', 'revalidate-nested', 'validate-small-lines', 'unread-downloads'] as const;
type Phase = (typeof PHASES)[number];

interface PhaseResult {
  phase: Phase;
  seconds: number;
  probes: number;
  healthz: { p50: number; p99: number; max: number };
  loop: { p99Ms: number; maxMs: number };
  note: string;
}

interface Started { url: string; workspaceId: string; apiKey: string; deploymentId: string; baseUrl: string }
interface Stats {
  slices: { validations: number; yields: number; longestSliceMs: number };
  rss: number;
  downloads: { active: number; heldBytes: number; maxHeldBytes: number };
}

/** A request without the id the IPC adds (per member of the union). */
type WithoutId<T> = T extends unknown ? Omit<T, 'id'> : never;

/** The server process and its IPC questions. */
class ServerChild {
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  readonly started: Promise<Started>;

  constructor(private readonly child: ChildProcess) {
    this.started = new Promise((resolve, reject) => {
      this.waiting.set(0, { resolve: (value) => resolve(value as Started), reject });
      child.once('exit', (code) => reject(new Error(`the server exited (${code})`)));
    });
    child.on('message', (message: { id: number; result?: unknown; error?: string }) => {
      const waiter = this.waiting.get(message.id);
      this.waiting.delete(message.id);
      if (message.error) waiter?.reject(new Error(message.error));
      else waiter?.resolve(message.result);
    });
  }

  ask<T>(request: WithoutId<BatchHolesRequest>): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.waiting.set(id, { resolve: (value) => resolve(value as T), reject });
      this.child.send({ ...request, id });
    });
  }
}

/** `/healthz` probed open-loop from a worker thread: its loop is never blocked by the bench's own work. */
const PROBE_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const http = require('node:http');
const { performance } = require('node:perf_hooks');
// node:http with kept-alive sockets: fetch's own cost (~15 ms p50 against a bare server here) would drown the server's.
const agent = new http.Agent({ keepAlive: true });
const latencies = [];
const pending = new Set();
let next = 0;
let stopped = false;
const get = () => new Promise((resolve) => {
  http.get(workerData.url + '/healthz', { agent }, (response) => { response.resume(); response.once('end', () => resolve(true)); })
    .once('error', () => resolve(false));
});
const send = (due) => {
  const done = get().then((ok) => { latencies.push(ok ? performance.now() - due : Infinity); });
  pending.add(done);
  done.finally(() => pending.delete(done));
};
const probe = () => {
  while (!stopped && next <= performance.now()) { send(next); next += workerData.probeMs; }
  if (!stopped) setTimeout(probe, Math.max(0, next - performance.now()));
};
// Warmed up (sockets open, code compiled): the parent then starts the work and the count.
Promise.all(Array.from({ length: 20 }, get)).then(() => parentPort.postMessage('ready'));
parentPort.on('message', async (message) => {
  if (message === 'begin') {
    next = performance.now();
    probe();
    return;
  }
  stopped = true;
  await Promise.all(pending);
  agent.destroy();
  parentPort.postMessage(latencies);
});`;

function percentile(sorted: number[], fraction: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
}

async function measured(server: ServerChild, url: string, probeMs: number, phase: Phase, work: () => Promise<string>): Promise<PhaseResult> {
  await server.ask({ kind: 'loop-start' });
  const worker = new Worker(PROBE_WORKER, { eval: true, workerData: { url, probeMs } });
  await new Promise((resolve) => worker.once('message', resolve));
  worker.postMessage('begin');
  const startedAt = Date.now();
  const note = await work();
  const seconds = (Date.now() - startedAt) / 1000;
  const latencies = await new Promise<number[]>((resolve) => {
    worker.once('message', resolve);
    worker.postMessage('stop');
  });
  await worker.terminate();
  const loop = await server.ask<{ p99Ms: number; maxMs: number }>({ kind: 'loop-stop' });
  const sorted = latencies.sort((a, b) => a - b);
  return { phase, seconds, probes: sorted.length, healthz: { p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99), max: sorted[sorted.length - 1] }, loop, note };
}

/** A JSONL file of at least `bytes`: lines of `[[[…]]]` nested 100,000 deep in a chat body. */
function nestedFile(bytes: number): Buffer {
  const depth = 100_000;
  const line = Buffer.from(`{"custom_id":"X","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi"}],"stop":${'['.repeat(depth)}${']'.repeat(depth)}}}\n`);
  const count = Math.ceil(bytes / line.length);
  const data = Buffer.allocUnsafe(line.length * count);
  // The same custom_id on every line does not matter: the scan refuses each line before its fields are read.
  for (let index = 0; index < count; index++) line.copy(data, index * line.length);
  return data;
}

function smallLinesFile(lines: number): Buffer {
  const parts: string[] = [];
  for (let index = 0; index < lines; index++) {
    parts.push(`{"custom_id":"r${index}","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"hi ${index}"}]}}\n`);
  }
  return Buffer.from(parts.join(''));
}

async function uploadRaw(started: Started, data: Buffer): Promise<{ status: number; body: any }> {
  const form = new FormData();
  form.append('purpose', 'batch');
  form.append('file', new Blob([data.buffer.slice(data.byteOffset, data.byteOffset + data.length) as ArrayBuffer]), 'input.jsonl');
  const response = await fetch(`${started.baseUrl}/files`, { method: 'POST', headers: { authorization: `Bearer ${started.apiKey}` }, body: form });
  return { status: response.status, body: await response.json() };
}

async function createBatch(started: Started, fileId: string): Promise<string> {
  const response = await fetch(`${started.baseUrl}/batches`, {
    method: 'POST', headers: { authorization: `Bearer ${started.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ input_file_id: fileId, endpoint: '/v1/chat/completions', completion_window: '24h' }),
  });
  return (await response.json() as { id: string }).id;
}

async function waitWhile(server: ServerChild, started: Started, batchId: string, status: string): Promise<{ status: string; errors: Array<{ message: string }> | null }> {
  for (;;) {
    const batch = await server.ask<{ status: string; errors: Array<{ message: string }> | null }>({ kind: 'batch', workspaceId: started.workspaceId, batchId });
    if (batch.status !== status) return batch;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function runPhases(server: ServerChild, started: Started, options: { megabytes: number; lines: number; downloads: number; probeMs: number; phases: Set<Phase> }): Promise<PhaseResult[]> {
  const { phases, probeMs } = options;
  const results: PhaseResult[] = [];
  const phase = async (name: Phase, work: () => Promise<string>) => {
    if (phases.has(name)) results.push(await measured(server, started.url, probeMs, name, work));
  };
  const nested = nestedFile(options.megabytes * 1_000_000);
  await phase('upload-nested', async () => {
    const answer = await uploadRaw(started, nested);
    return `${(nested.length / 1e6).toFixed(0)} MB: ${answer.status} ${answer.body.error?.message ?? ''}`;
  });
  // As if uploaded before the upload scan existed: the object and its row, written directly.
  const nestedFileId = `file-${'0'.repeat(23)}1`;
  if (phases.has('validate-nested') || phases.has('revalidate-nested')) {
    const objectKey = `${started.workspaceId}/files/${nestedFileId}.jsonl`;
    const temporary = path.join(os.tmpdir(), `batch-holes-${randomBytes(4).toString('hex')}.jsonl`);
    fs.writeFileSync(temporary, nested);
    await server.ask({ kind: 'put-object', key: objectKey, path: temporary });
    fs.rmSync(temporary);
    await server.ask({ kind: 'query', sql: `INSERT INTO batch_files (id, workspace_id, deployment_id, purpose, filename, bytes, object_key)
      VALUES ($1, $2, $3, 'batch', 'nested.jsonl', $4, $5)`, params: [nestedFileId, started.workspaceId, started.deploymentId, nested.length, objectKey] });
  }
  for (const name of ['validate-nested', 'revalidate-nested'] as const) {
    await phase(name, async () => {
      const batch = await waitWhile(server, started, await createBatch(started, nestedFileId), 'validating');
      return `${batch.status}, ${batch.errors?.length ?? 0} errors listed: ${batch.errors?.[0]?.message ?? ''}`;
    });
  }
  if (!phases.has('validate-small-lines') && !phases.has('unread-downloads')) return results;
  const small = smallLinesFile(options.lines);
  const uploaded = await uploadRaw(started, small);
  if (uploaded.status !== 200) throw new Error(`upload of the small-lines file: ${uploaded.status} ${JSON.stringify(uploaded.body)}`);
  const smallFileId = uploaded.body.id as string;
  await phase('validate-small-lines', async () => {
    const before = (await server.ask<Stats>({ kind: 'stats' })).slices;
    const batchId = await createBatch(started, smallFileId);
    const batch = await waitWhile(server, started, batchId, 'validating');
    const after = (await server.ask<Stats>({ kind: 'stats' })).slices;
    const [{ bytes }] = await server.ask<Array<{ bytes: string }>>({ kind: 'query', sql: 'SELECT coalesce(sum(pg_column_size(l.*)), 0)::bigint AS bytes FROM batch_lines l WHERE batch_id = $1', params: [batchId] });
    await server.ask({ kind: 'cancel', workspaceId: started.workspaceId, batchId });
    return `${(small.length / 1e6).toFixed(1)} MB, ${options.lines} lines → ${batch.status}; batch_lines rows ${(Number(bytes) / 1e6).toFixed(1)} MB; `
      + `${after.yields - before.yields} yields, longest slice ${after.longestSliceMs.toFixed(1)} ms`;
  });
  await phase('unread-downloads', async () => {
    const rssBefore = (await server.ask<Stats>({ kind: 'stats' })).rss;
    const url = new URL(`${started.baseUrl}/files/${smallFileId}/content`);
    const requests: http.ClientRequest[] = [];
    for (let index = 0; index < options.downloads; index++) {
      requests.push(http.get(url, { headers: { authorization: `Bearer ${started.apiKey}` } }, (response) => response.pause()).on('error', () => undefined));
    }
    let stats = await server.ask<Stats>({ kind: 'stats' });
    let rssPeak = stats.rss;
    let heldPeak = 0;
    let activePeak = 0;
    for (const until = Date.now() + 3_000; Date.now() < until;) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      stats = await server.ask<Stats>({ kind: 'stats' });
      rssPeak = Math.max(rssPeak, stats.rss);
      heldPeak = Math.max(heldPeak, stats.downloads.heldBytes);
      activePeak = Math.max(activePeak, stats.downloads.active);
    }
    for (const request of requests) request.destroy();
    return `${options.downloads} × ${(small.length / 1e6).toFixed(1)} MB unread (${activePeak} still sending at most): held ${(heldPeak / MiB).toFixed(2)} MiB in all at most, `
      + `at most ${(stats.downloads.maxHeldBytes / 1024).toFixed(0)} KiB by one; server RSS +${((rssPeak - rssBefore) / MiB).toFixed(0)} MiB`;
  });
  return results;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      megabytes: { type: 'string', default: '100' }, lines: { type: 'string', default: '1000000' }, downloads: { type: 'string', default: '25' },
      'probe-ms': { type: 'string', default: '5' }, phases: { type: 'string', default: PHASES.join(',') },
      'admin-url': { type: 'string', default: 'postgres://postgres@127.0.0.1:5432/postgres' },
    },
  });
  const options = {
    megabytes: Number(values.megabytes), lines: Number(values.lines), downloads: Number(values.downloads), probeMs: Number(values['probe-ms']),
    phases: new Set(values.phases!.split(',') as Phase[]),
  };
  const adminUrl = values['admin-url']!;
  const databaseName = `bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${databaseName}`);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-batch-holes-'));
  const start: BatchHolesStart = {
    databaseUrl: Object.assign(new URL(adminUrl), { pathname: `/${databaseName}` }).toString(), dataDir,
    // Room for both files (a small line is ~120 bytes).
    maxLines: Math.max(50_000, options.lines), filesMaxBytes: Math.max(100 * MiB, (options.megabytes + 20) * MiB, options.lines * 160 + MiB),
  };
  const child = fork(path.join(__dirname, 'batch-holes-server.js'), [JSON.stringify(start)], { stdio: 'inherit' });
  const server = new ServerChild(child);
  let results: PhaseResult[] = [];
  try {
    results = await runPhases(server, await server.started, options);
  } finally {
    await server.ask({ kind: 'stop' }).catch(() => child.kill('SIGKILL'));
    await new Promise((resolve) => (child.exitCode === null ? child.once('exit', resolve) : resolve(null)));
    await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
  report(results, { megabytes: options.megabytes, lines: options.lines, downloads: options.downloads, probeMs: options.probeMs });
}

async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function report(results: PhaseResult[], options: Record<string, number>): void {
  const sha = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_ROOT }).toString().trim();
  const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(1) : String(value));
  const rows = results.map((result) => `| ${result.phase} | ${result.seconds.toFixed(1)} | ${result.probes} | `
    + `${ms(result.healthz.p50)} / ${ms(result.healthz.p99)} / ${ms(result.healthz.max)} | ${ms(result.loop.p99Ms)} / ${ms(result.loop.maxMs)} | ${result.note} |`);
  const text = [
    `# Batch holes at ${sha} (${new Date().toISOString().slice(0, 10)})`, '',
    `Options: ${JSON.stringify(options)}. /healthz probed open-loop every ${options.probeMs} ms from a worker thread, each probe timed from when it was due; `
    + 'loop delay: the server process\'s monitorEventLoopDelay.', '',
    '| phase | s | probes | /healthz p50 / p99 / max ms | server loop delay p99 / max ms | what happened |', '|---|---:|---:|---|---|---|', ...rows, '',
  ].join('\n');
  console.log(text);
  const file = path.join(PROJECT_ROOT, 'bench', 'results', `${new Date().toISOString().slice(0, 10)}-batch-holes-${sha}.md`);
  fs.writeFileSync(file, text);
  console.log(`written to ${path.relative(PROJECT_ROOT, file)}`);
}

main().then(() => process.exit(0), (error) => {
  console.error(error);
  process.exit(1);
});
