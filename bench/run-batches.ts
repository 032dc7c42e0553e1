/**
 * `npm run bench:batches` (issue 22): does a batch run in the capacity live traffic leaves free
 * without slowing that traffic? One server (embedded PostgreSQL), its first-run chat deployment
 * on one local replica of the CPU engine with a finite capacity (`--slots` jobs at once, each
 * answered after `--ttft-ms` at `--tokens-per-second`), and four runs in this order:
 *
 * 1. live: an open-loop live load (streamed chat, Poisson arrivals at `--load` of the replica's
 *    nominal capacity, or `--rate`), alone;
 * 2. batch: a `--lines` (10,000) line batch of the same requests (same prompt shape and
 *    max_tokens, not streamed), alone: the deployment's batch throughput with no live load;
 * 3. mixed: the same live load (the same arrival times) with a second batch of the same file;
 * 4. live-again: the live load alone once more, so the baseline is taken on both sides of the
 *    batch runs (the machine's drift and the run-to-run noise of a p99 show up as the
 *    difference between 1 and 4).
 *
 * Every run is `--warmup` s unmeasured, then `--seconds` s measured. The batches do not run to
 * the end: at the default settings a 10,000-line batch needs ~15 min of the replica alone, so
 * its throughput is read over the measured window (from the batch's `usage.output_tokens`,
 * polled every `--poll-ms`) and the batch is then cancelled (`--finish` lets the mixed run's
 * batch run to `completed` instead and checks every custom_id in its output).
 *
 * Targets: live TTFT p99 of run 3 ≤ 1.10 × that of runs 1 and 4 (pooled), and the batch's
 * output tokens/s in run 3 ≥ 0.80 × the capacity left free, defined as run 2's batch tokens/s
 * (what the deployment produces with no live load) minus run 1's live tokens/s (what the live
 * load takes of it).
 *
 * Flags: --seconds 60 --warmup 10 --grace 30 --slots 4 --ttft-ms 50 --tokens-per-second 100
 *        --max-tokens 32 --load 0.5 | --rate N --lines 10000 --arrivals poisson|fixed --seed 1
 *        --poll-ms 1000 --runs live,batch,mixed,live-again --finish --suffix NAME
 *        --env KEY=VALUE (extra server environment, repeatable)
 *        --server-per-batch (each batch run starts on a fresh server: one whose database has held
 *        no batch; the runs after it stay on that server)
 * Results: bench/results/<date>-batches-<sha>[-suffix].{md,json}.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import OpenAI, { toFile } from 'openai';
import {
  counterAt, liveLoad, liveStats, meanInFlight, promptFor, Watcher, type LiveSample, type LiveStats, type WatchSample,
} from './batch-live-load';
import { describeMachine, sourceState } from './machine';
import { percentile } from './paced-client';
import { coresBetween, cpuByRole, machineTicks, type CpuSnapshot } from './processes';
import { saveResults } from './report';
import { BenchServer, onStop, sleep, stopEverything, until } from './routing-processes';
import { outstandingJobs, round, scrape } from './routing-stats';
import { freePort } from './targets';

const RUNS = ['live', 'batch', 'mixed', 'live-again'] as const;
type RunName = (typeof RUNS)[number];
const TERMINAL = new Set(['completed', 'failed', 'expired', 'cancelled']);
const ENDPOINT = '/v1/chat/completions';

interface Options {
  seconds: number;
  warmup: number;
  grace: number;
  slots: number;
  ttftMs: number;
  tokensPerSecond: number;
  maxTokens: number;
  load: number;
  rate: number;
  rateGiven: boolean;
  lines: number;
  arrivals: 'poisson' | 'fixed';
  seed: number;
  pollMs: number;
  runs: RunName[];
  finish: boolean;
  suffix: string;
  env: Record<string, string>;
  /** Each batch run on a fresh server (see the flag). */
  serverPerBatch: boolean;
}

interface BatchReading {
  id: string;
  /** Create → in_progress (validation of the input file). */
  validationMs: number;
  /** Window used for the rate (ms from the run's origin); shorter than the run's when the batch ran out of lines. */
  windowFromMs: number;
  windowToMs: number;
  ranOutEarly: boolean;
  linesInWindow: number;
  outputTokensInWindow: number;
  outputTokensPerSecond: number;
  linesPerSecond: number;
  /** Output tokens per completed line over the whole batch (the engine answers max_tokens every time). */
  tokensPerLine: number;
  end: {
    how: 'cancelled' | 'finished';
    /** Cancel request → terminal status. */
    cancelToTerminalMs: number | null;
    /** Lines completed between the cancel request and the terminal status (the ones already running). */
    completedAfterCancel: number | null;
    /** Create → terminal status, when run to the end. */
    totalMs: number | null;
    status: string;
    requestCounts: { total: number; completed: number; failed: number };
    usage: { inputTokens: number; outputTokens: number };
  };
  output: OutputCheck;
}

interface OutputCheck {
  outputLines: number;
  errorLines: number;
  status200: number;
  otherStatus: Record<string, number>;
  duplicateCustomIds: number;
  unknownCustomIds: number;
  /** Input custom_ids in neither file (only meaningful for a batch run to the end). */
  missingCustomIds: number;
  completionTokens: number;
  errorCodes: Record<string, number>;
  problems: string[];
}

interface Run {
  name: RunName;
  /** What ran: live load and/or batch. */
  live: (LiveStats & { rate: number }) | null;
  batch: BatchReading | null;
  occupancy: { byClass: Record<string, number>; queued: number; samples: number };
  machine: { busyCores: number; stealPercent: number; loadAverage1m: number; coresByRole: Record<string, number> };
  wallSeconds: number;
  /** Per live request: [scheduled s, TTFT ms or null, total ms or null, completion tokens, status, cut 0/1]. */
  requests: Array<[number, number | null, number | null, number, number, number]>;
  /** The watcher's readings: [s, status, completed, failed, output tokens, live in flight, batch in flight, queued]. */
  watch: Array<[number, string | null, number | null, number | null, number | null, number, number, number]>;
}

let aborted = false;
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    if (aborted) return;
    aborted = true;
    console.error(`\n${signal}: stopping the server and its agent`);
    void stopEverything().then(() => process.exit(130));
  });
}

function log(line: string): void {
  console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
}

/** Nominal output tokens/s of one replica: every slot busy, each job ttft + max_tokens at the engine's speed. */
function nominalCapacity(options: Pick<Options, 'slots' | 'ttftMs' | 'tokensPerSecond' | 'maxTokens'>): { requestsPerSecond: number; tokensPerSecond: number; serviceMs: number } {
  const serviceMs = options.ttftMs + (options.tokensPerSecond > 0 ? (options.maxTokens * 1000) / options.tokensPerSecond : 0);
  const requestsPerSecond = (options.slots * 1000) / Math.max(1, serviceMs);
  return { requestsPerSecond: round(requestsPerSecond, 2), tokensPerSecond: round(requestsPerSecond * options.maxTokens), serviceMs: round(serviceMs) };
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      seconds: { type: 'string', default: '60' }, warmup: { type: 'string', default: '10' }, grace: { type: 'string', default: '30' },
      slots: { type: 'string', default: '4' }, 'ttft-ms': { type: 'string', default: '50' }, 'tokens-per-second': { type: 'string', default: '100' },
      'max-tokens': { type: 'string', default: '32' }, load: { type: 'string', default: '0.5' }, rate: { type: 'string' },
      lines: { type: 'string', default: '10000' }, arrivals: { type: 'string', default: 'poisson' }, seed: { type: 'string', default: '1' },
      'poll-ms': { type: 'string', default: '1000' }, runs: { type: 'string', default: RUNS.join(',') }, finish: { type: 'boolean', default: false },
      suffix: { type: 'string', default: '' }, env: { type: 'string', multiple: true, default: [] }, 'server-per-batch': { type: 'boolean', default: false },
    },
  });
  const runs = values.runs.split(',').map((run) => run.trim()).filter(Boolean) as RunName[];
  for (const run of runs) if (!RUNS.includes(run)) throw new Error(`--runs: unknown run ${run} (${RUNS.join(', ')})`);
  if (values.arrivals !== 'poisson' && values.arrivals !== 'fixed') throw new Error('--arrivals: poisson or fixed');
  const env: Record<string, string> = {};
  for (const entry of values.env) {
    const equals = entry.indexOf('=');
    if (equals < 1) throw new Error(`--env: KEY=VALUE, got ${entry}`);
    env[entry.slice(0, equals)] = entry.slice(equals + 1);
  }
  const base = {
    slots: Number(values.slots), ttftMs: Number(values['ttft-ms']), tokensPerSecond: Number(values['tokens-per-second']), maxTokens: Number(values['max-tokens']),
  };
  const load = Number(values.load);
  const rate = values.rate !== undefined ? Number(values.rate) : round(load * nominalCapacity(base).requestsPerSecond, 2);
  const options: Options = {
    ...base, seconds: Number(values.seconds), warmup: Number(values.warmup), grace: Number(values.grace), load, rate, rateGiven: values.rate !== undefined,
    lines: Number(values.lines), arrivals: values.arrivals, seed: Number(values.seed), pollMs: Number(values['poll-ms']), runs, finish: values.finish,
    suffix: values.suffix, env, serverPerBatch: values['server-per-batch'],
  };
  for (const [name, value] of Object.entries(options)) if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`--${name}: not a number`);
  return options;
}

// ---------------------------------------------------------------------------------------------
// Machine and process accounting (as the routing benchmark reads it).

/** CPU time by role: the server, its agent, PostgreSQL, the rest, and this client. */
function cpuOf(server: BenchServer): CpuSnapshot {
  return cpuByRole((pid) => (pid === server.pid ? 'server' : undefined), { agents: 'agent' });
}

/** Starts the machine and process accounting of a run; the returned function reads it. */
function account(server: BenchServer): () => Run['machine'] {
  const ticks = machineTicks();
  const cpu = cpuOf(server);
  const started = performance.now();
  return () => {
    const ticksAfter = machineTicks();
    const total = Math.max(1, ticksAfter.total - ticks.total);
    const busyCores = round(((ticksAfter.busy - ticks.busy) / total) * os.cpus().length, 2);
    const coresByRole = coresBetween(cpu, cpuOf(server), (performance.now() - started) / 1000);
    coresByRole['other work'] = round(Math.max(0, busyCores - Object.values(coresByRole).reduce((sum, value) => sum + value, 0)), 2);
    return { busyCores, stealPercent: round(((ticksAfter.steal - ticks.steal) / total) * 100, 2), loadAverage1m: round(os.loadavg()[0], 2), coresByRole };
  };
}

// ---------------------------------------------------------------------------------------------
// The runs.

interface Setup {
  server: BenchServer;
  client: OpenAI;
  deployment: { id: string; slug: string; modelId: string };
  inputFileId: string;
  customIds: Set<string>;
  options: Options;
}

/** Until no job of the deployment runs or waits on the server. */
async function waitIdle(setup: Setup): Promise<void> {
  const started = Date.now();
  await until(async () => outstandingJobs(await scrape(setup.server.baseUrl), setup.deployment.id) === 0, 180_000, 'the deployment to go idle', 250);
  if (Date.now() - started > 2_000) log(`  idle after ${((Date.now() - started) / 1000).toFixed(1)} s`);
  await sleep(1_000);
}

function progressLine(samples: readonly LiveSample[], elapsedMs: number, watcher: Watcher | null): string {
  const done = samples.filter((sample) => sample.endedAt !== null && !sample.cut);
  const recent = samples.filter((sample) => sample.firstTokenAt !== null && sample.scheduledAt >= elapsedMs - 10_000)
    .map((sample) => sample.firstTokenAt! - sample.scheduledAt).sort((a, b) => a - b);
  const batch = watcher?.last();
  return `${(elapsedMs / 1000).toFixed(0)} s: live sent ${samples.length}, done ${done.length}, failed ${done.filter((sample) => sample.status !== 200).length}, ` +
    `TTFT p50/p99 of the last 10 s ${recent.length ? `${percentile(recent, 0.5).toFixed(0)}/${percentile(recent, 0.99).toFixed(0)} ms` : '–'}` +
    (batch ? `; batch ${batch.status} ${batch.completed} done, ${batch.outputTokens} tokens` : '');
}

function watchRows(samples: readonly WatchSample[]): Run['watch'] {
  return samples.map((sample) => [
    round(sample.at / 1000, 2), sample.status ?? null, sample.completed ?? null, sample.failed ?? null, sample.outputTokens ?? null,
    sample.inFlight.owner ?? 0, sample.inFlight.batch ?? 0, sample.queued,
  ]);
}

function requestRows(samples: readonly LiveSample[], fromMs: number): Run['requests'] {
  return samples.filter((sample) => sample.scheduledAt >= fromMs).map((sample) => [
    round(sample.scheduledAt / 1000, 3), sample.firstTokenAt === null ? null : round(sample.firstTokenAt - sample.scheduledAt),
    sample.endedAt === null ? null : round(sample.endedAt - sample.scheduledAt), sample.completionTokens, sample.status, sample.cut ? 1 : 0,
  ]);
}

async function runLive(setup: Setup, name: RunName): Promise<Run> {
  const { options } = setup;
  log(`[${name}] live load alone: ${options.rate} req/s (${options.arrivals}), ${options.warmup} s warm-up + ${options.seconds} s measured`);
  const read = account(setup.server);
  const origin = performance.now();
  const watcher = new Watcher(setup.client, setup.server.baseUrl, setup.deployment.id, origin, options.pollMs);
  watcher.start();
  const live = await liveLoad(liveOptions(setup, (samples, elapsed) => log(`  [${name}] ${progressLine(samples, elapsed, null)}`)), name, origin);
  await watcher.stop();
  const machine = read();
  if (aborted) throw new Error('aborted');
  const fromMs = options.warmup * 1000;
  const toMs = (options.warmup + options.seconds) * 1000;
  const stats = liveStats(live.samples, fromMs, toMs);
  const occupancy = meanInFlight(watcher.samples, fromMs, toMs);
  const run: Run = {
    name, live: { ...stats, rate: options.rate }, batch: null, occupancy: { ...occupancy, samples: occupancy.count }, machine,
    wallSeconds: round((performance.now() - origin) / 1000), requests: requestRows(live.samples, fromMs), watch: watchRows(watcher.samples),
  };
  log(`  [${name}] ${describeRun(run)}`);
  await waitIdle(setup);
  return run;
}

function liveOptions(setup: Setup, progress: (samples: readonly LiveSample[], elapsedMs: number) => void) {
  const { options } = setup;
  return {
    client: setup.client, model: setup.deployment.modelId, maxTokens: options.maxTokens, rate: options.rate, seconds: options.warmup + options.seconds,
    arrivals: options.arrivals, seed: options.seed, graceMs: options.grace * 1000, progress, aborted: () => aborted,
  };
}

async function runBatch(setup: Setup, name: RunName, withLive: boolean): Promise<Run> {
  const { client, options } = setup;
  const finish = withLive && options.finish;
  log(`[${name}] ${withLive ? `live load (${options.rate} req/s) with ` : ''}a ${setup.customIds.size}-line batch: ${options.warmup} s warm-up + ${options.seconds} s measured, then ${finish ? 'run to the end' : 'cancelled'}`);
  const created = await client.batches.create({ input_file_id: setup.inputFileId, endpoint: ENDPOINT, completion_window: '24h', metadata: { bench: name } });
  const createdAt = performance.now();
  let batch = created;
  while (batch.status === 'validating') {
    if (aborted) throw new Error('aborted');
    if (performance.now() - createdAt > 300_000) throw new Error(`batch ${batch.id} still validating after 300 s`);
    await sleep(100);
    batch = await client.batches.retrieve(batch.id);
  }
  if (batch.status !== 'in_progress' && batch.status !== 'finalizing' && batch.status !== 'completed') {
    throw new Error(`batch ${batch.id} is ${batch.status} after validation: ${JSON.stringify(batch.errors ?? null).slice(0, 2000)}`);
  }
  const validationMs = round(performance.now() - createdAt);
  log(`  [${name}] batch ${batch.id} ${batch.status} after ${validationMs} ms of validation`);

  const read = account(setup.server);
  const origin = performance.now();
  const watcher = new Watcher(client, setup.server.baseUrl, setup.deployment.id, origin, options.pollMs);
  watcher.batchId = batch.id;
  watcher.start();
  const progress = setInterval(() => { if (!withLive) log(`  [${name}] ${progressLine([], performance.now() - origin, watcher)}`); }, 10_000);
  const fromMs = options.warmup * 1000;
  const toMs = (options.warmup + options.seconds) * 1000;
  let live: Awaited<ReturnType<typeof liveLoad>> | null = null;
  try {
    if (withLive) live = await liveLoad(liveOptions(setup, (samples, elapsed) => log(`  [${name}] ${progressLine(samples, elapsed, watcher)}`)), name, origin);
    else {
      while (performance.now() - origin < toMs && !aborted) {
        const last = watcher.last();
        if (last && last.status !== 'in_progress') break;
        await sleep(200);
      }
    }
  } finally {
    clearInterval(progress);
  }
  if (aborted) throw new Error('aborted');
  // A reading past the window's end, so the interpolation has both sides.
  await watcher.tick();
  const machine = read();

  // End the batch: cancel it (the default), or let it run to the end (--finish, mixed run only).
  let end: BatchReading['end'];
  const before = watcher.last()!;
  if (finish) {
    log(`  [${name}] letting the batch run to the end (${before.completed}/${setup.customIds.size} done)`);
    const finishStarted = performance.now();
    let lastLog = finishStarted;
    while (!TERMINAL.has(watcher.last()?.status ?? '')) {
      if (aborted) throw new Error('aborted');
      await sleep(options.pollMs);
      if (performance.now() - lastLog > 30_000) {
        lastLog = performance.now();
        const last = watcher.last();
        log(`  [${name}] batch ${last?.status} ${last?.completed}/${setup.customIds.size} done`);
      }
    }
    const final = await client.batches.retrieve(batch.id);
    end = {
      how: 'finished', cancelToTerminalMs: null, completedAfterCancel: null, totalMs: round(performance.now() - createdAt), status: final.status,
      requestCounts: { total: final.request_counts?.total ?? 0, completed: final.request_counts?.completed ?? 0, failed: final.request_counts?.failed ?? 0 },
      usage: { inputTokens: final.usage?.input_tokens ?? 0, outputTokens: final.usage?.output_tokens ?? 0 },
    };
  } else {
    const cancelAt = performance.now();
    const cancelled = await client.batches.cancel(batch.id);
    const completedAtCancel = cancelled.request_counts?.completed ?? before.completed ?? 0;
    let final = cancelled;
    while (!TERMINAL.has(final.status)) {
      if (aborted) throw new Error('aborted');
      if (performance.now() - cancelAt > 180_000) throw new Error(`batch ${batch.id} still ${final.status} 180 s after its cancel`);
      await sleep(100);
      final = await client.batches.retrieve(batch.id);
    }
    end = {
      how: 'cancelled', cancelToTerminalMs: round(performance.now() - cancelAt), completedAfterCancel: (final.request_counts?.completed ?? 0) - completedAtCancel,
      totalMs: null, status: final.status,
      requestCounts: { total: final.request_counts?.total ?? 0, completed: final.request_counts?.completed ?? 0, failed: final.request_counts?.failed ?? 0 },
      usage: { inputTokens: final.usage?.input_tokens ?? 0, outputTokens: final.usage?.output_tokens ?? 0 },
    };
    log(`  [${name}] cancel → ${final.status} in ${end.cancelToTerminalMs} ms (${end.completedAfterCancel} lines finished meanwhile)`);
  }
  await watcher.stop();
  const final = await client.batches.retrieve(batch.id);
  const output = await checkOutput(setup, final, finish);

  // The batch's throughput over the measured window, or over the part of it before the batch
  // ran out of lines (a short --lines run).
  const readings = watcher.samples.filter((sample) => sample.status !== undefined);
  const ranOut = readings.find((sample) => sample.status !== 'in_progress' || (sample.completed ?? 0) + (sample.failed ?? 0) >= setup.customIds.size);
  const windowToMs = ranOut && ranOut.at < toMs ? readings[Math.max(0, readings.indexOf(ranOut) - 1)].at : toMs;
  const tokensAt = (at: number) => counterAt(readings, (sample) => sample.outputTokens, at);
  const linesAt = (at: number) => counterAt(readings, (sample) => sample.completed, at);
  const windowSeconds = Math.max(1e-3, (windowToMs - fromMs) / 1000);
  const outputTokensInWindow = tokensAt(windowToMs) - tokensAt(fromMs);
  const linesInWindow = linesAt(windowToMs) - linesAt(fromMs);
  const reading: BatchReading = {
    id: batch.id, validationMs, windowFromMs: fromMs, windowToMs: round(windowToMs), ranOutEarly: windowToMs < toMs,
    linesInWindow: round(linesInWindow), outputTokensInWindow: round(outputTokensInWindow),
    outputTokensPerSecond: round(outputTokensInWindow / windowSeconds), linesPerSecond: round(linesInWindow / windowSeconds, 2),
    tokensPerLine: end.requestCounts.completed ? round(end.usage.outputTokens / end.requestCounts.completed, 2) : NaN,
    end, output,
  };
  const occupancy = meanInFlight(watcher.samples, fromMs, toMs);
  const run: Run = {
    name, live: live ? { ...liveStats(live.samples, fromMs, toMs), rate: options.rate } : null, batch: reading,
    occupancy: { ...occupancy, samples: occupancy.count }, machine, wallSeconds: round((performance.now() - origin) / 1000),
    requests: live ? requestRows(live.samples, fromMs) : [], watch: watchRows(watcher.samples),
  };
  log(`  [${name}] ${describeRun(run)}`);
  if (output.problems.length) log(`  [${name}] output file problems: ${output.problems.join('; ')}`);
  await waitIdle(setup);
  return run;
}

/** Reads the batch's output and error files and checks them against the input's custom_ids and the batch's counts. */
async function checkOutput(setup: Setup, batch: OpenAI.Batches.Batch, complete: boolean): Promise<OutputCheck> {
  const check: OutputCheck = {
    outputLines: 0, errorLines: 0, status200: 0, otherStatus: {}, duplicateCustomIds: 0, unknownCustomIds: 0, missingCustomIds: 0, completionTokens: 0, errorCodes: {}, problems: [],
  };
  const seen = new Set<string>();
  const read = async (fileId: string | null | undefined, kind: 'output' | 'error') => {
    if (!fileId) return;
    const text = await (await setup.client.files.content(fileId)).text();
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      let parsed: { custom_id?: string; response?: { status_code?: number; body?: { usage?: { completion_tokens?: number } } } | null; error?: { code?: string } | null };
      try {
        parsed = JSON.parse(line);
      } catch {
        check.problems.push(`${kind} file: a line is not JSON`);
        continue;
      }
      if (kind === 'output') check.outputLines++;
      else check.errorLines++;
      const id = parsed.custom_id ?? '';
      if (seen.has(id)) check.duplicateCustomIds++;
      seen.add(id);
      if (!setup.customIds.has(id)) check.unknownCustomIds++;
      const status = parsed.response?.status_code;
      if (status === 200) {
        check.status200++;
        check.completionTokens += parsed.response?.body?.usage?.completion_tokens ?? 0;
      } else if (status !== undefined) check.otherStatus[String(status)] = (check.otherStatus[String(status)] ?? 0) + 1;
      if (parsed.error) check.errorCodes[parsed.error.code ?? 'unknown'] = (check.errorCodes[parsed.error.code ?? 'unknown'] ?? 0) + 1;
    }
  };
  await read(batch.output_file_id, 'output');
  await read(batch.error_file_id, 'error');
  if (complete) for (const id of setup.customIds) if (!seen.has(id)) check.missingCustomIds++;
  const completed = batch.request_counts?.completed ?? 0;
  if (check.duplicateCustomIds) check.problems.push(`${check.duplicateCustomIds} custom_ids answered more than once`);
  if (check.unknownCustomIds) check.problems.push(`${check.unknownCustomIds} custom_ids not in the input file`);
  if (check.missingCustomIds) check.problems.push(`${check.missingCustomIds} input custom_ids in neither file`);
  if (check.status200 !== completed) check.problems.push(`${check.status200} lines answered 200 in the output file, request_counts.completed ${completed}`);
  if (check.completionTokens !== (batch.usage?.output_tokens ?? 0)) check.problems.push(`output file completion tokens ${check.completionTokens}, batch usage.output_tokens ${batch.usage?.output_tokens}`);
  return check;
}

function describeRun(run: Run): string {
  const parts: string[] = [];
  if (run.live) {
    const { ttftMs } = run.live;
    parts.push(`live ${run.live.completed}/${run.live.sent} ok, failed ${run.live.failed}, cut ${run.live.cut}, TTFT p50/p90/p99 ${ttftMs.p50}/${ttftMs.p90}/${ttftMs.p99} ms, ${run.live.outputTokensPerSecond} tok/s`);
  }
  if (run.batch) parts.push(`batch ${run.batch.outputTokensPerSecond} tok/s (${run.batch.linesPerSecond} lines/s${run.batch.ranOutEarly ? ', ran out of lines before the window ended' : ''})`);
  parts.push(`slots busy: ${Object.entries(run.occupancy.byClass).map(([name, value]) => `${name} ${value}`).join(', ') || '–'}`);
  parts.push(`machine ${run.machine.busyCores} cores busy (${Object.entries(run.machine.coresByRole).map(([role, value]) => `${role} ${value}`).join(', ')})`);
  return parts.join('; ');
}

// ---------------------------------------------------------------------------------------------
// Targets and the report.

interface Targets {
  baselineP99Ms: number | null;
  baselineCount: number;
  mixedP99Ms: number | null;
  p99Ratio: number | null;
  capacityTokensPerSecond: number | null;
  liveTokensPerSecond: number | null;
  freeTokensPerSecond: number | null;
  mixedBatchTokensPerSecond: number | null;
  freeShareUsed: number | null;
  rows: Array<{ name: string; measured: string; goal: string; pass: boolean | null }>;
}

function targets(runs: Run[]): Targets {
  const find = (name: RunName) => runs.find((run) => run.name === name);
  const baselineRuns = [find('live'), find('live-again')].filter((run): run is Run => Boolean(run?.live));
  const mixed = find('mixed');
  const batchOnly = find('batch');
  // The baseline p99: runs 1 and 4 pooled (every measured request of both).
  const baselineTtfts = pooledTtfts(baselineRuns);
  const baselineP99 = baselineTtfts.length ? round(percentile(baselineTtfts, 0.99)) : null;
  const mixedP99 = mixed?.live ? mixed.live.ttftMs.p99 : null;
  const p99Ratio = baselineP99 && mixedP99 !== null ? round(mixedP99 / baselineP99, 3) : null;
  const capacity = batchOnly?.batch ? batchOnly.batch.outputTokensPerSecond : null;
  const liveTokens = find('live')?.live?.outputTokensPerSecond ?? find('live-again')?.live?.outputTokensPerSecond ?? null;
  const free = capacity !== null && liveTokens !== null ? round(capacity - liveTokens) : null;
  const mixedBatch = mixed?.batch ? mixed.batch.outputTokensPerSecond : null;
  const share = free !== null && mixedBatch !== null && free > 0 ? round(mixedBatch / free, 3) : null;
  const rows: Targets['rows'] = [
    {
      name: 'live TTFT p99 with the batch ÷ live alone (runs 1 and 4 pooled)',
      measured: p99Ratio === null ? 'not measured (runs live/live-again and mixed needed)' : `${mixedP99} ÷ ${baselineP99} ms = ${p99Ratio.toFixed(3)}`,
      goal: '≤ 1.10', pass: p99Ratio === null ? null : p99Ratio <= 1.1,
    },
    {
      name: 'batch tokens/s with live load ÷ capacity left free (batch alone − live alone)',
      measured: share === null ? 'not measured (runs live, batch and mixed needed)' : `${mixedBatch} ÷ (${capacity} − ${liveTokens}) = ${mixedBatch} ÷ ${free} = ${share.toFixed(3)}`,
      goal: '≥ 0.80', pass: share === null ? null : share >= 0.8,
    },
  ];
  return {
    baselineP99Ms: baselineP99, baselineCount: baselineTtfts.length, mixedP99Ms: mixedP99, p99Ratio, capacityTokensPerSecond: capacity, liveTokensPerSecond: liveTokens,
    freeTokensPerSecond: free, mixedBatchTokensPerSecond: mixedBatch, freeShareUsed: share, rows,
  };
}

/** TTFTs of every measured request of the given live runs (a request cut before its first token counts with its wait). */
function pooledTtfts(runs: readonly Run[]): number[] {
  const values: number[] = [];
  for (const run of runs) {
    for (const [, ttft, total, , status, cut] of run.requests) {
      if (ttft !== null && (status === 200 || cut)) values.push(ttft);
      else if (cut && total !== null) values.push(total);
    }
  }
  return values.sort((a, b) => a - b);
}

const RUN_TITLES: Record<RunName, string> = {
  live: '1. live alone', batch: '2. batch alone', mixed: '3. live + batch', 'live-again': '4. live alone again',
};

function commandLine(options: Options): string {
  const defaults = { seconds: 60, warmup: 10, slots: 4, ttftMs: 50, tokensPerSecond: 100, maxTokens: 32, lines: 10_000 };
  const flags: string[] = [];
  if (options.seconds !== defaults.seconds) flags.push(`--seconds ${options.seconds}`);
  if (options.warmup !== defaults.warmup) flags.push(`--warmup ${options.warmup}`);
  if (options.slots !== defaults.slots) flags.push(`--slots ${options.slots}`);
  if (options.ttftMs !== defaults.ttftMs) flags.push(`--ttft-ms ${options.ttftMs}`);
  if (options.tokensPerSecond !== defaults.tokensPerSecond) flags.push(`--tokens-per-second ${options.tokensPerSecond}`);
  if (options.maxTokens !== defaults.maxTokens) flags.push(`--max-tokens ${options.maxTokens}`);
  if (options.lines !== defaults.lines) flags.push(`--lines ${options.lines}`);
  if (options.rateGiven) flags.push(`--rate ${options.rate}`);
  else if (options.load !== 0.5) flags.push(`--load ${options.load}`);
  if (options.arrivals !== 'poisson') flags.push(`--arrivals ${options.arrivals}`);
  if (options.seed !== 1) flags.push(`--seed ${options.seed}`);
  if (options.runs.join(',') !== RUNS.join(',')) flags.push(`--runs ${options.runs.join(',')}`);
  if (options.finish) flags.push('--finish');
  if (options.serverPerBatch) flags.push('--server-per-batch');
  for (const [key, value] of Object.entries(options.env)) flags.push(`--env ${key}=${value}`);
  return `npm run bench:batches${flags.length ? ` -- ${flags.join(' ')}` : ''}`;
}

function write(results: {
  machine: Record<string, string | number>; source: ReturnType<typeof sourceState>; options: Options; startedAt: string; wallSeconds: number; loadAverage: number[];
  setup: Record<string, unknown>; runs: Run[]; targets: Targets;
}): void {
  const { machine, options, runs } = results;
  const name = `${results.startedAt.slice(0, 10)}-batches-${machine.gitSha}${options.suffix ? `-${options.suffix}` : ''}`;
  const nominal = nominalCapacity(options);
  const setup = results.setup as { model: string; slug: string; fileBytes: number; uploadMs: number; lines: number; servers?: Array<{ runs: RunName[]; slug: string }> };
  const t = results.targets;
  const fmt = (value: number | null | undefined, digits = 1) => (value === null || value === undefined || !Number.isFinite(value) ? '–' : value.toFixed(digits));
  const lines: string[] = [
    `# Batch benchmark ${name}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Linux ${machine.kernel}; Node ${machine.node}; load average (1 min) ${results.loadAverage.map((value) => value.toFixed(2)).join(' → ')}.`,
    `Commit: ${results.source.commit}${results.source.changedOutsideBench.length ? ` (the working tree differed outside bench/, so the server ran uncommitted code: ${results.source.changedOutsideBench.slice(0, 12).map((line) => `\`${line}\``).join(', ')}${results.source.changedOutsideBench.length > 12 ? `, … ${results.source.changedOutsideBench.length} entries` : ''})` : ' (clean outside bench/)'}.`,
    `Run: \`${commandLine(options)}\`, ${results.wallSeconds} s in all.`,
    '',
    `Setup: ${(setup.servers?.length ?? 0) > 1 ? 'a server at a time' : 'one server'} (\`dist/gateway/main.js\`, embedded PostgreSQL), its first-run deployment ${setup.model} (\`/d/${setup.slug}/v1\`) pinned to 1 replica: one local agent with the CPU engine, ` +
      `\`LOCAL_AGENT_MAX_CONCURRENCY=${options.slots}\` (${options.slots} jobs at once), \`WORKER_CPU_TTFT_MS=${options.ttftMs}\`, \`WORKER_CPU_TOKENS_PER_SECOND=${options.tokensPerSecond}\` (per job). ` +
      `Every request, live or batch, is one ~20-word user message with max_tokens ${options.maxTokens} (the engine always answers all ${options.maxTokens}), so a job holds a slot ~${nominal.serviceMs} ms and the replica's nominal capacity is ` +
      `${options.slots} × ${options.maxTokens} tokens / ${nominal.serviceMs} ms = ${nominal.requestsPerSecond} req/s = **${nominal.tokensPerSecond} output tokens/s**.`,
    ...((setup.servers?.length ?? 0) > 1 ? [
      `\`--server-per-batch\`: ${setup.servers!.map((entry, index) => `server ${index + 1} (a fresh one, same settings) ran ${entry.runs.map((run) => RUN_TITLES[run].replace(/^\d+\. /, '')).join(', ')}`).join('; ')}. ` +
        'So no batch ran on a database that had held an earlier batch (a workaround for a server bug, see bench/README.md); the p99 baseline then pools runs of two servers.',
    ] : []),
    `Live load: the \`openai\` SDK, streamed chat completions (\`stream_options.include_usage\`), open loop, ${options.arrivals === 'poisson' ? 'Poisson' : 'evenly spaced'} arrivals (seed ${options.seed}: every live run replays the same send times) at ` +
      `**${options.rate} req/s**${options.rateGiven ? ' (--rate)' : ` (${options.load} × the nominal capacity)`}. TTFT = scheduled send → first chunk with content.`,
    `Batch: one ${setup.lines}-line JSONL input file (${(setup.fileBytes / 1e6).toFixed(2)} MB, uploaded with \`files.create\` in ${setup.uploadMs} ms), \`batches.create\` on \`${ENDPOINT}\`, once for run 2 and again for run 3. ` +
      `Its throughput is read from \`batches.retrieve\` (\`usage.output_tokens\`, interpolated between readings every ${options.pollMs} ms) over the measured window. ` +
      (options.finish ? 'Run 2\'s batch is cancelled after the window; run 3\'s runs to the end (--finish).' : `Both batches are cancelled after the window: at ~${nominal.requestsPerSecond} lines/s a ${setup.lines}-line batch would need ~${Math.round(setup.lines / nominal.requestsPerSecond / 60)} min alone.`),
    `Each run: ${options.warmup} s warm-up (the batch's window grows from one line; live and batch start together in run 3), then ${options.seconds} s measured; live requests scheduled in the window count, ` +
      `and those still running ${options.grace} s after the last send are cut (counted with their wait so far). The server's defaults for batches were not changed${Object.keys(options.env).length ? ` (extra server environment: ${Object.entries(options.env).map(([key, value]) => `\`${key}=${value}\``).join(', ')})` : ''}.`,
    '', '## Targets', '', '| target | measured | goal | result |', '|---|---|---|---|',
    ...t.rows.map((row) => `| ${row.name} | ${row.measured} | ${row.goal} | ${row.pass === null ? '–' : row.pass ? '**PASS**' : '**FAIL**'} |`),
    '',
    `Capacity left free: the deployment produces C = ${fmt(t.capacityTokensPerSecond)} output tokens/s of batch lines when nothing else runs (run 2); the live load takes L = ${fmt(t.liveTokensPerSecond)} tokens/s of it (run 1: ` +
      `live and batch requests are the same shape, so a token of either holds a slot as long); what is left is C − L = ${fmt(t.freeTokensPerSecond)} tokens/s, and the batch of run 3 should produce ≥ 80 % of that. ` +
      `The p99 baseline pools the measured requests of runs 1 and 4 (${t.baselineCount} TTFTs), taken before and after the batch runs; each run's own p99 is in the table below.`,
    '', '## Runs', '',
    '| run | live sent / ok / failed / cut | live TTFT p50 / p90 / p99 / max ms | live tok/s | batch tok/s (lines/s) | slots busy: live / batch (of ' + options.slots + ') | live waiting | cores busy: machine (ours by role) |',
    '|---|---|---|---:|---|---|---:|---|',
  ];
  for (const run of runs) {
    const live = run.live;
    const errors = live && Object.keys(live.errors).length ? ` (${Object.entries(live.errors).map(([key, value]) => `${key}: ${value}`).join(', ')})` : '';
    lines.push(`| ${RUN_TITLES[run.name]} | ${live ? `${live.sent} / ${live.completed} / ${live.failed}${errors} / ${live.cut}` : '–'} | ` +
      `${live ? `${live.ttftMs.p50} / ${live.ttftMs.p90} / ${live.ttftMs.p99} / ${live.ttftMs.max}${live.ttftMs.censored ? ` (${live.ttftMs.censored} cut before a token)` : ''}` : '–'} | ` +
      `${live ? live.outputTokensPerSecond : '–'} | ${run.batch ? `${run.batch.outputTokensPerSecond} (${run.batch.linesPerSecond})${run.batch.ranOutEarly ? ' ran out of lines' : ''}` : '–'} | ` +
      `${fmt(run.occupancy.byClass.owner ?? 0, 2)} / ${fmt(run.occupancy.byClass.batch ?? 0, 2)} | ${fmt(run.occupancy.queued, 2)} | ${run.machine.busyCores} (${Object.entries(run.machine.coresByRole).map(([role, value]) => `${role} ${value}`).join(', ')}) |`);
  }
  lines.push('',
    '"slots busy" and "live waiting": the server\'s `inference_in_flight` of the deployment by class (owner = live, batch) and `inference_queue_depth`, read with every batch reading and averaged over the window (instantaneous samples: a rough occupancy). ' +
    '"cores busy": the whole VM over the run (/proc/stat), and by process (server, agent, postgres, this client; "other work" is the rest of the machine).', '');
  const batchRuns = runs.filter((run) => run.batch);
  if (batchRuns.length) {
    lines.push('## Batches', '', '| run | batch | validation ms | lines in window | tokens/line | how it ended | end status, counts | output file check |', '|---|---|---:|---:|---:|---|---|---|');
    for (const run of batchRuns) {
      const batch = run.batch!;
      const ended = batch.end.how === 'cancelled'
        ? `cancelled: ${batch.end.cancelToTerminalMs} ms to \`${batch.end.status}\`, ${batch.end.completedAfterCancel} lines finished after the cancel`
        : `ran to the end in ${fmt((batch.end.totalMs ?? NaN) / 1000)} s`;
      const counts = `${batch.end.status}: ${batch.end.requestCounts.completed} completed, ${batch.end.requestCounts.failed} failed of ${batch.end.requestCounts.total}; ${batch.end.usage.outputTokens} output tokens`;
      const out = batch.output;
      const check = `${out.outputLines} output lines (${out.status200} × 200${Object.keys(out.otherStatus).length ? `, ${JSON.stringify(out.otherStatus)}` : ''}), ${out.errorLines} error lines${Object.keys(out.errorCodes).length ? ` (${Object.entries(out.errorCodes).map(([key, value]) => `${key} ${value}`).join(', ')})` : ''}; ` +
        (out.problems.length ? `**problems: ${out.problems.join('; ')}**` : 'custom_ids unique and all from the input; 200s = completed; tokens = usage');
      lines.push(`| ${RUN_TITLES[run.name]} | ${batch.id} | ${batch.validationMs} | ${batch.linesInWindow}${batch.ranOutEarly ? ` (window cut at ${(batch.windowToMs / 1000).toFixed(1)} s: no lines left)` : ''} | ${fmt(batch.tokensPerLine, 2)} | ${ended} | ${counts} | ${check} |`);
    }
    lines.push('');
  }
  lines.push('Raw numbers (every measured live request: scheduled s, TTFT ms, total ms, completion tokens, status, cut; every batch/metrics reading) are in the .json file.', '');
  saveResults(name, results, lines.join('\n'));
}

// ---------------------------------------------------------------------------------------------

function batchFile(model: string, lines: number, maxTokens: number): { data: Buffer; customIds: Set<string> } {
  const customIds = new Set<string>();
  const parts: string[] = [];
  const width = String(lines).length;
  for (let index = 0; index < lines; index++) {
    const customId = `line-${String(index + 1).padStart(width, '0')}`;
    customIds.add(customId);
    parts.push(JSON.stringify({ custom_id: customId, method: 'POST', url: ENDPOINT, body: { model, messages: [{ role: 'user', content: promptFor('batch', index) }], max_tokens: maxTokens } }));
  }
  return { data: Buffer.from(`${parts.join('\n')}\n`), customIds };
}

/** A server with the deployment on one replica, the input file uploaded and the live path warmed. */
async function startSetup(options: Options, agentEnvFile: string, index: number): Promise<{ setup: Setup & { info: Record<string, unknown> }; stop: () => Promise<void> }> {
  const { server, stop } = await BenchServer.spawn(`batches-${index + 1}`, {
    EMBEDDED_DATABASE_PORT: String(await freePort()), LOCAL_AGENT_MAX_CONCURRENCY: String(options.slots),
    LOCAL_AGENT_NODE_ARGS: [`--env-file=${agentEnvFile}`, ...(process.env.BENCH_AGENT_NODE_ARGS ?? '').split(' ').filter(Boolean)].join(' '),
    ...options.env,
  });
  server.key = (await server.waitFor(/API key:\s+(mk-\S+)/, 120_000, 'the first-run banner'))[1];
  const [deployment] = (await server.graphql('{ deployments { id slug modelId } }')).deployments as Setup['deployment'][];
  await server.graphql('mutation($id: ID!) { updateDeployment(id: $id, input: {minReplicas: 1, maxReplicas: 1}) { id } }', { id: deployment.id });
  await until(async () => {
    const data = await server.graphql('query($id: ID!) { deployment(id: $id) { replicas { status maxConcurrency } } }', { id: deployment.id });
    return data.deployment.replicas.filter((replica: { status: string; maxConcurrency: number }) => replica.status === 'Running' && replica.maxConcurrency === options.slots).length === 1;
  }, 120_000, `one replica Running with ${options.slots} slots`, 500);
  const client = new OpenAI({ apiKey: server.key, baseURL: `${server.baseUrl}/d/${deployment.slug}/v1`, maxRetries: 0, timeout: 600_000 });
  log(`server ${index + 1} up: deployment ${deployment.slug} (${deployment.modelId}), 1 replica × ${options.slots} slots`);

  const { data, customIds } = batchFile(deployment.modelId, options.lines, options.maxTokens);
  const uploadStarted = performance.now();
  const file = await client.files.create({ file: await toFile(data, 'bench-batch.jsonl'), purpose: 'batch' });
  const uploadMs = round(performance.now() - uploadStarted);
  log(`uploaded ${file.id}: ${options.lines} lines, ${data.length} bytes in ${uploadMs} ms`);
  const info = { model: deployment.modelId, slug: deployment.slug, fileId: file.id, fileBytes: data.length, uploadMs, lines: options.lines, nominal: nominalCapacity(options) };
  const setup = { server, client, deployment, inputFileId: file.id, customIds, options, info };

  // Warm the live path (JIT, connections) and the engine: a few seconds at the live rate, unmeasured.
  await liveLoad({ ...liveOptions(setup, () => undefined), seconds: 3, seed: options.seed + 1000 }, 'warm');
  await waitIdle(setup);
  return { setup, stop };
}

async function main(): Promise<void> {
  const options = parseOptions();
  const startedAt = new Date().toISOString();
  const loadBefore = os.loadavg()[0];
  const nominal = nominalCapacity(options);
  log(`batch benchmark: runs ${options.runs.join(', ')}; ${options.warmup} + ${options.seconds} s each; replica ${options.slots} slots × (${options.ttftMs} ms + ${options.maxTokens} tokens at ${options.tokensPerSecond}/s) = ` +
    `${nominal.requestsPerSecond} req/s, ${nominal.tokensPerSecond} tokens/s nominal; live ${options.rate} req/s; ${options.lines} batch lines`);
  const needed = Math.ceil(nominal.requestsPerSecond * (options.warmup + options.seconds) * 1.2);
  if (options.lines < needed) log(`note: ${options.lines} lines may run out before a run's window ends (~${needed} would last it); the batch's rate is then read up to when it ran out`);

  // Agents get a fixed environment from the server (PATH, NODE_ENV, WORKER_*), not the server's
  // own: node's --env-file, passed as an agent node flag, gives them the CPU engine's timing.
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-batches-'));
  onStop('work directory', async () => fs.rmSync(workDir, { recursive: true, force: true }));
  const agentEnvFile = path.join(workDir, 'agent.env');
  fs.writeFileSync(agentEnvFile, `WORKER_CPU_TTFT_MS=${options.ttftMs}\nWORKER_CPU_TOKENS_PER_SECOND=${options.tokensPerSecond}\n`);
  fs.chmodSync(workDir, 0o755);
  fs.chmodSync(agentEnvFile, 0o644);

  let spawned: BenchServer | null = null;
  const runs: Run[] = [];
  let setupInfo: Record<string, unknown> = {};
  let current: { setup: Setup & { info: Record<string, unknown> }; stop: () => Promise<void>; batches: number } | null = null;
  const servers: Array<{ runs: RunName[]; slug: string }> = [];
  try {
    for (const name of options.runs) {
      if (aborted) break;
      const batchRun = name === 'batch' || name === 'mixed';
      // --server-per-batch: each batch runs on a server whose database has seen no batch before.
      if (current && batchRun && options.serverPerBatch && current.batches > 0) {
        log('--server-per-batch: stopping this server; the next batch runs on a fresh one');
        await current.stop();
        current = null;
      }
      if (!current) {
        current = { ...(await startSetup(options, agentEnvFile, servers.length)), batches: 0 };
        servers.push({ runs: [], slug: current.setup.deployment.slug });
        if (servers.length === 1) setupInfo = current.setup.info;
      }
      servers.at(-1)!.runs.push(name);
      spawned = current.setup.server;
      if (batchRun) current.batches++;
      if (name === 'live' || name === 'live-again') runs.push(await runLive(current.setup, name));
      else runs.push(await runBatch(current.setup, name, name === 'mixed'));
    }
  } catch (error) {
    // What the server said last (it logs at warn): why a run failed is usually there.
    const server = spawned as BenchServer | null;
    if (server) {
      const exited = server.child.exitCode !== null || server.child.signalCode !== null;
      const logFile = path.join(os.tmpdir(), `bench-batches-server-${Date.now()}.log`);
      fs.writeFileSync(logFile, server.said());
      console.error(`server ${exited ? `exited (code ${server.child.exitCode}, signal ${server.child.signalCode})` : 'still running'}; its whole output is in ${logFile}; the last of it:\n${server.said().slice(-4000)}`);
    }
    throw error;
  } finally {
    await stopEverything();
  }
  setupInfo = { ...setupInfo, servers };
  const result = targets(runs);
  log(result.rows.map((row) => `${row.name}: ${row.measured} (${row.goal}) ${row.pass === null ? '–' : row.pass ? 'PASS' : 'FAIL'}`).join('\n'));
  write({
    machine: describeMachine(), source: sourceState(), options, startedAt, wallSeconds: Math.round((Date.now() - Date.parse(startedAt)) / 1000),
    loadAverage: [loadBefore, os.loadavg()[0]], setup: setupInfo, runs, targets: result,
  });
}

main().catch(async (error) => {
  console.error(error);
  await stopEverything();
  process.exit(1);
});
