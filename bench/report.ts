/** Medians of repeated runs, the Markdown tables, and the check against the targets. */
import fs from 'node:fs';
import path from 'node:path';
import type { RunResult } from './scenario';
import { PROJECT_ROOT } from './targets';

export interface Summary {
  scenario: string;
  target: string;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  addedP50Ms: number | null;
  addedP99Ms: number | null;
  ttfbP50Ms: number | null;
  addedTtfbP50Ms: number | null;
  cpuMicrosPerRequest: Record<string, number>;
  rssMiB: Record<string, number>;
  failed: number;
}

export function median(values: number[]): number {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  if (sorted.length === 0) return NaN;
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/**
 * A distribution-free confidence interval for the median of `values` (at least `confidence`,
 * 0.95 by default): the k-th smallest and k-th largest value, k the largest rank such that a
 * Binomial(n, ½) falls below it with probability at most (1 − confidence) / 2. It assumes only
 * that the values are independent draws (repetitions), not that their noise is normal: on a VM
 * whose speed drifts, one slow repetition moves it by one rank, not by its size. Null when there
 * are too few values for any such interval (fewer than 6 at 95 %).
 */
export function medianInterval(values: number[], confidence = 0.95): { low: number; high: number; confidence: number } | null {
  const sorted = values.filter((value) => Number.isFinite(value)).sort((a, b) => a - b);
  const n = sorted.length;
  const tail = (1 - confidence) / 2;
  // below[k] = P(Binomial(n, ½) < k), built up from the probability of each count.
  let probability = 0.5 ** n;
  let below = 0;
  let rank = 0;
  for (let count = 0; count < n; count++) {
    if (below + probability > tail) break;
    below += probability;
    rank = count + 1;
    probability = (probability * (n - count)) / (count + 1);
  }
  if (rank === 0) return null;
  return { low: sorted[rank - 1], high: sorted[n - rank], confidence: 1 - 2 * below };
}

/** Each repetition's `role` CPU µs per request of `target` over `base`'s in the same scenario and repetition (bench:tracing's pairing). */
export function baseRatios(runs: RunResult[], scenario: string, target: string, role = 'gateway'): number[] {
  return runs.filter((run) => run.scenario === scenario && run.target === target).flatMap((run) => {
    const base = runs.find((other) => other.scenario === scenario && other.target === 'base' && other.repetition === run.repetition);
    const ratio = base ? run.cpuMicrosPerRequest[role] / base.cpuMicrosPerRequest[role] : NaN;
    return Number.isFinite(ratio) ? [ratio] : [];
  });
}

/** A ratio as a signed change: 1.124 → "+12.4 %". */
export function percentChange(ratio: number): string {
  return `${ratio >= 1 ? '+' : ''}${((ratio - 1) * 100).toFixed(1)} %`;
}

/** Medians per scenario and target; "added" compares each run to `baseline` (direct) in the same repetition. */
export function summarize(runs: RunResult[], baseline = 'direct'): Summary[] {
  const keys = [...new Set(runs.map((run) => `${run.scenario}|${run.target}`))];
  return keys.map((key) => {
    const [scenario, target] = key.split('|');
    const mine = runs.filter((run) => run.scenario === scenario && run.target === target);
    const direct = (run: RunResult) => runs.find((other) => other.scenario === scenario && other.target === baseline && other.repetition === run.repetition);
    const added = (pick: (run: RunResult) => number | null) => target === baseline ? null
      : median(mine.map((run) => { const base = direct(run); return base && pick(run) !== null && pick(base) !== null ? pick(run)! - pick(base)! : NaN; }));
    const roles = [...new Set(mine.flatMap((run) => Object.keys(run.cpuMicrosPerRequest)))];
    return {
      scenario, target,
      requestsPerSecond: median(mine.map((run) => run.requestsPerSecond)),
      p50Ms: median(mine.map((run) => run.p50Ms)), p99Ms: median(mine.map((run) => run.p99Ms)),
      addedP50Ms: added((run) => run.p50Ms), addedP99Ms: added((run) => run.p99Ms),
      ttfbP50Ms: mine[0].ttfbP50Ms === null ? null : median(mine.map((run) => run.ttfbP50Ms ?? NaN)),
      addedTtfbP50Ms: mine[0].ttfbP50Ms === null ? null : added((run) => run.ttfbP50Ms),
      cpuMicrosPerRequest: Object.fromEntries(roles.map((role) => [role, median(mine.map((run) => run.cpuMicrosPerRequest[role] ?? NaN))])),
      rssMiB: Object.fromEntries(roles.map((role) => [role, median(mine.map((run) => run.rssMiB[role] ?? NaN))])),
      failed: mine.reduce((sum, run) => sum + run.failed, 0),
    };
  });
}

export const number = (value: number | null, digits = 2) => (value === null || !Number.isFinite(value) ? '–' : value.toFixed(digits));
/** A difference with its sign: +0.42, -0.10. */
export const signed = (value: number | null, digits = 2) => (value === null || !Number.isFinite(value) ? '–' : `${value < 0 ? '' : '+'}${value.toFixed(digits)}`);

export function markdownTables(summaries: Summary[]): string {
  const lines: string[] = [];
  for (const scenario of [...new Set(summaries.map((summary) => summary.scenario))]) {
    lines.push(`### ${scenario}`, '', '| target | req/s | p50 ms | p99 ms | added p50 / p99 ms | TTFB p50 ms (added) | CPU µs/request | RSS MiB | failed |', '|---|---:|---:|---:|---|---|---|---|---:|');
    for (const summary of summaries.filter((candidate) => candidate.scenario === scenario)) {
      const cpu = Object.entries(summary.cpuMicrosPerRequest).map(([role, value]) => `${role} ${number(value, 0)}`).join(', ');
      const rss = Object.entries(summary.rssMiB).filter(([role]) => role !== 'upstream').map(([role, value]) => `${role} ${number(value, 1)}`).join(', ');
      const ttfb = summary.ttfbP50Ms === null ? '–' : `${number(summary.ttfbP50Ms)} (${signed(summary.addedTtfbP50Ms)})`;
      const added = summary.addedP50Ms === null ? '–' : `${signed(summary.addedP50Ms)} / ${signed(summary.addedP99Ms)}`;
      lines.push(`| ${summary.target} | ${number(summary.requestsPerSecond, 0)} | ${number(summary.p50Ms)} | ${number(summary.p99Ms)} | ${added} | ${ttfb} | ${cpu} | ${rss || '–'} | ${summary.failed} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

/** The targets, each PASS or FAIL against the medians. */
export function targetsCheck(summaries: Summary[]): string {
  const ours = (scenario: string) => summaries.find((summary) => summary.scenario === scenario && summary.target === 'ours');
  const rows: Array<[string, number | null | undefined, (value: number) => boolean, string]> = [
    ['gateway CPU per non-streamed request (c=64)', ours('json c=64')?.cpuMicrosPerRequest.gateway, (value) => value <= 150, '≤ 150 µs'],
    ['gateway CPU per 20-chunk stream (c=64)', ours('stream c=64')?.cpuMicrosPerRequest.gateway, (value) => value <= 200, '≤ 200 µs'],
    ['agent CPU per non-streamed request (c=64)', ours('json c=64')?.cpuMicrosPerRequest.agent, (value) => value <= 100, '≤ 100 µs'],
    ['agent CPU per 20-chunk stream (c=64)', ours('stream c=64')?.cpuMicrosPerRequest.agent, (value) => value <= 100, '≤ 100 µs'],
    ['added p50 latency over direct, c=8', ours('json c=8')?.addedP50Ms, (value) => value <= 1.5, '≤ 1.5 ms'],
    ['added p99 latency over direct, c=8', ours('json c=8')?.addedP99Ms, (value) => value <= 4, '≤ 4 ms'],
    ['added TTFB p50 for streams, paced', ours('stream paced')?.addedTtfbP50Ms, (value) => value <= 1, '≤ 1 ms'],
    ['throughput non-streaming, c=64', ours('json c=64')?.requestsPerSecond, (value) => value >= 4000, '≥ 4,000 req/s'],
  ];
  // Issue 24: our whole path (gateway, agent, PostgreSQL) against the bare Koa hop of the same run.
  const koa = (scenario: string) => summaries.find((summary) => summary.scenario === scenario && summary.target === 'koa');
  const cpu = (summary: Summary | undefined) => (summary ? Object.entries(summary.cpuMicrosPerRequest).filter(([role]) => role !== 'upstream').reduce((sum, [, micros]) => sum + micros, 0) : undefined);
  const ratio = (mine: number | null | undefined, floor: number | null | undefined) => (mine === undefined || mine === null || !floor ? undefined : mine / floor);
  rows.push(
    ['CPU per request ÷ bare Koa hop, JSON c=8', ratio(cpu(ours('json c=8')), cpu(koa('json c=8'))), (value) => value <= 1.5, '≤ 1.5×'],
    ['CPU per request ÷ bare Koa hop, SSE c=8', ratio(cpu(ours('stream c=8')), cpu(koa('stream c=8'))), (value) => value <= 1.5, '≤ 1.5×'],
    ['added p99 ÷ bare Koa hop\'s, JSON c=8', ratio(ours('json c=8')?.addedP99Ms, koa('json c=8')?.addedP99Ms), (value) => value <= 3, '≤ 3×'],
    ['throughput ÷ bare Koa hop\'s, JSON c=64', ratio(ours('json c=64')?.requestsPerSecond, koa('json c=64')?.requestsPerSecond), (value) => value >= 0.75, '≥ 0.75×'],
  );
  const lines = ['| target | measured | goal | result |', '|---|---:|---|---|'];
  for (const [name, value, passes, goal] of rows) {
    lines.push(`| ${name} | ${value === undefined || value === null ? 'not measured' : number(value, value > 100 ? 0 : 2)} | ${goal} | ${value === undefined || value === null ? '–' : passes(value) ? 'PASS' : 'FAIL'} |`);
  }
  return lines.join('\n');
}

/**
 * Issue 24's "which processes spend the rest": per scenario at c=8, the bare Koa hop, the
 * transport floor (grpc-floor.ts: our two processes and gRPC, none of our code) and our path,
 * CPU µs per request by process. Empty when the floor or Koa was not measured.
 */
export function floorBreakdown(summaries: Summary[]): string {
  const find = (scenario: string, target: string) => summaries.find((summary) => summary.scenario === scenario && summary.target === target);
  const lines = ['| scenario | bare Koa hop | floor: gateway + agent | ours: gateway + agent + postgres | floor ÷ Koa | ours ÷ Koa | our code (ours − floor) |', '|---|---:|---|---|---:|---:|---:|'];
  for (const scenario of ['json c=8', 'stream c=8', 'json c=64', 'stream c=64']) {
    const [koa, floor, ours] = [find(scenario, 'koa'), find(scenario, 'floor'), find(scenario, 'ours')];
    if (!koa || !floor || !ours) continue;
    const total = (summary: Summary) => Object.entries(summary.cpuMicrosPerRequest).filter(([role]) => role !== 'upstream').reduce((sum, [, micros]) => sum + micros, 0);
    const parts = (summary: Summary) => Object.entries(summary.cpuMicrosPerRequest).filter(([role]) => role !== 'upstream').map(([role, micros]) => `${role} ${number(micros, 0)}`).join(', ');
    lines.push(`| ${scenario} | ${number(total(koa), 0)} | ${number(total(floor), 0)} (${parts(floor)}) | ${number(total(ours), 0)} (${parts(ours)}) | ${number(total(floor) / total(koa))}× | ${number(total(ours) / total(koa))}× | ${number(total(ours) - total(floor), 0)} µs |`);
  }
  return lines.length > 2 ? lines.join('\n') : '';
}

/**
 * `stamp`, or `stamp-2`, `stamp-3`… when a result of that name is already in `directory`: two runs
 * of one commit on one day (another scenario, more repetitions) never write over each other.
 */
export function freshResultName(directory: string, stamp: string): string {
  let name = stamp;
  for (let copy = 2; fs.existsSync(path.join(directory, `${name}.json`)) || fs.existsSync(path.join(directory, `${name}.md`)); copy++) name = `${stamp}-${copy}`;
  return name;
}

/** Writes `bench/results/<stamp>.json` and `.md` (numbered if taken: freshResultName) and prints the Markdown. */
export function saveResults(stamp: string, results: unknown, markdown: string): void {
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  const name = freshResultName(directory, stamp);
  fs.writeFileSync(path.join(directory, `${name}.json`), JSON.stringify(results, null, 2));
  fs.writeFileSync(path.join(directory, `${name}.md`), markdown);
  console.log(`\n${markdown}\nwrote bench/results/${name}.{json,md}`);
}
