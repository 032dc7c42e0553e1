/** The numbers of `bench:hostile`: the ordinary tenant's latencies, the targets, and the Markdown report. */
import { percentile } from '../paced-client';
import type { AttackReport } from './attack';
import type { SetupNotes } from './attacker-setup';
import type { Answer } from './http-call';
import { TENANT_CALLS, type TenantCall } from './ordinary-tenant';
import type { WatchSummary } from './server-watch';

export interface Stats { count: number; p50Ms: number; p99Ms: number; maxMs: number; failed: number; errors: Record<string, number> }

export interface WindowResult {
  seconds: number;
  tenant: Record<TenantCall, Stats>;
  watch: WatchSummary;
  /** [seconds from the window's start, ms] of every /healthz probe. */
  healthzTimeline: Array<[number, number]>;
}

export interface PhaseResult {
  name: string;
  title: string;
  finding: string;
  setup: SetupNotes;
  headline: string[];
  baseline: WindowResult;
  attack: WindowResult & {
    /** Seconds the attacker took to hold what it set out to (null: it was still ramping up at the end). */
    rampSeconds: number | null;
    /** From the window's end until the tenant's last call was answered and then /healthz answered within 50 ms three times in a row (null: not within 60 s). */
    recoverySeconds: number | null;
    report: AttackReport;
  };
  targets: Target[];
}

export interface Target { target: string; measured: string; goal: string; pass: boolean }

const round = (value: number) => Math.round(value * 10) / 10;

/** Latencies of the calls sent in [from, to); failures count with the time they took (a probe that timed out after 60 s is a 60 s answer). */
export function stats(answers: Answer[], from: number, to: number): Stats {
  const mine = answers.filter((answer) => answer.startedAt >= from && answer.startedAt < to);
  const times = mine.map((answer) => answer.ms).sort((left, right) => left - right);
  const errors: Record<string, number> = {};
  for (const answer of mine) {
    if (answer.error === undefined) continue;
    const name = `${answer.status} ${answer.error}`.trim();
    errors[name] = (errors[name] ?? 0) + 1;
  }
  return {
    count: mine.length, p50Ms: round(percentile(times, 0.5)), p99Ms: round(percentile(times, 0.99)), maxMs: round(times.at(-1) ?? NaN),
    failed: mine.filter((answer) => answer.error !== undefined).length, errors,
  };
}

/** Issue 33's targets for one phase against its own baseline. */
export function targets(baseline: WindowResult, attack: WindowResult, budgetMiB: number): Target[] {
  const rows: Target[] = [{ target: '/healthz p99', measured: `${attack.tenant.healthz.p99Ms} ms`, goal: '≤ 50 ms', pass: attack.tenant.healthz.count > 0 && attack.tenant.healthz.p99Ms <= 50 }];
  for (const name of ['chat', 'creditBalance', 'createApiKey'] as const) {
    const limit = 2 * baseline.tenant[name].p99Ms;
    rows.push({
      target: `${name} p99`, measured: attack.tenant[name].count === 0 ? 'none sent in the window' : `${attack.tenant[name].p99Ms} ms (${ratio(attack, baseline, name)}×)`, goal: `≤ 2 × ${baseline.tenant[name].p99Ms} = ${round(limit)} ms`,
      pass: attack.tenant[name].count > 0 && attack.tenant[name].p99Ms <= limit,
    });
  }
  const { serverRssPeakMiB, gatewayRssMiB, agents } = attack.watch;
  rows.push({
    target: 'server RSS peak (gateway + agents)', measured: `${serverRssPeakMiB} MiB (gateway ${gatewayRssMiB.peak}, ${agents.peak} agents ${agents.rssPeakMiB})`,
    goal: `≤ ${budgetMiB} + 200 MiB`, pass: serverRssPeakMiB <= budgetMiB + 200,
  });
  const refused = refusals(attack);
  rows.push({ target: 'ordinary tenant\'s calls refused', measured: refused.total === 0 ? '0' : `${refused.total} (${refused.text})`, goal: '0', pass: refused.total === 0 });
  return rows;
}

export function ratio(attack: WindowResult, baseline: WindowResult, name: TenantCall): number {
  return Math.round((attack.tenant[name].p99Ms / baseline.tenant[name].p99Ms) * 100) / 100;
}

/** Every non-2xx (or GraphQL error, timeout, connection error) of the tenant, by call and status. */
export function refusals(window: WindowResult): { total: number; text: string } {
  const parts: string[] = [];
  let total = 0;
  for (const name of TENANT_CALLS) {
    for (const [error, count] of Object.entries(window.tenant[name].errors)) {
      total += count;
      parts.push(`${name} ${error} ×${count}`);
    }
  }
  return { total, text: parts.join(', ') };
}

/** One row per phase: what the attack achieved, /healthz p99, the worst ratio of the tenant's p99s to unloaded, RSS. */
export function summaryTable(phases: PhaseResult[]): string[] {
  return [
    '| finding | what the attack achieved | /healthz p99 | other tenant p99 ÷ unloaded (chat, creditBalance, createApiKey) | server RSS peak (gateway + agents) | other tenant refused |',
    '|---|---|---:|---|---:|---|',
    ...phases.map((phase) => {
      const { attack, baseline } = phase;
      const achieved = phase.headline.map((key) => `${key}: ${attack.report.achieved[key] ?? '–'}`).join('; ');
      const ratios = (['chat', 'creditBalance', 'createApiKey'] as const).map((name) => `${ratio(attack, baseline, name)}×`).join(', ');
      const refused = refusals(attack);
      return `| ${phase.title} | ${achieved} | ${attack.tenant.healthz.p99Ms} ms | ${ratios} | ${attack.watch.serverRssPeakMiB} MiB (${attack.watch.agents.peak} agents) | ${refused.total} |`;
    }),
  ];
}

export function phaseMarkdown(phase: PhaseResult, budgetMiB: number): string[] {
  const { baseline, attack } = phase;
  const row = (stat: Stats) => `${stat.count} | ${stat.p50Ms} | ${stat.p99Ms} | ${stat.maxMs} | ${stat.failed}${stat.failed ? ` (${Object.entries(stat.errors).map(([error, count]) => `${error} ×${count}`).join(', ')})` : ''}`;
  const tenantRows = (label: string, window: WindowResult) => TENANT_CALLS.filter((name) => window.tenant[name].count > 0)
    .map((name) => `| ${label} | ${name} | ${row(window.tenant[name])} |`);
  const serverRow = (label: string, window: WindowResult) => {
    const watch = window.watch;
    return `| ${label} | ${watch.loadAverage1m.start} → ${watch.loadAverage1m.end} | ${watch.gatewayRssMiB.start} / ${watch.gatewayRssMiB.peak} / ${watch.gatewayRssMiB.end} | ` +
      `${watch.agents.start} → ${watch.agents.peak} | ${watch.agents.rssStartMiB} / ${watch.agents.rssPeakMiB} | ${watch.serverRssPeakMiB} | ${watch.postgresRssPeakMiB} | ` +
      `${watch.gatewayFds.start} / ${watch.gatewayFds.peak} | ${Object.entries(watch.cpuCores).map(([role, cores]) => `${role} ${cores}`).join(', ')} |`;
  };
  const report = attack.report;
  return [
    `## ${phase.title} (\`${phase.name}\`)`, '',
    `Finding: ${phase.finding}. Setup: ${Object.entries(phase.setup).map(([what, value]) => `${what}: ${value}`).join('; ') || 'nothing'}.`,
    `Baseline ${baseline.seconds} s; attack window ${attack.seconds} s (the attacker's ramp-up ${attack.rampSeconds === null ? 'had not finished' : `took ${attack.rampSeconds} s`}); ` +
    `recovered ${attack.recoverySeconds === null ? 'not within 60 s' : `${attack.recoverySeconds} s`} after the window.`, '',
    '| target | measured | goal | result |', '|---|---|---|---|',
    ...phase.targets.map((target) => `| ${target.target} | ${target.measured} | ${target.goal} | **${target.pass ? 'PASS' : 'FAIL'}** |`), '',
    '| window | call | count | p50 ms | p99 ms | max ms | failed |', '|---|---|---:|---:|---:|---:|---|',
    ...tenantRows('baseline', baseline), ...tenantRows('attack', attack), '',
    '| window | load 1m | gateway RSS MiB start / peak / end | agents | agents RSS MiB start / peak | gateway + agents peak MiB | PostgreSQL RSS peak MiB | gateway fds start / peak | CPU cores |',
    '|---|---|---|---|---|---:|---:|---|---|',
    serverRow('baseline', baseline), serverRow('attack', attack), '',
    `The attacker (${report.seconds} s): ${Object.entries(report.achieved).map(([what, value]) => `${what}: ${value}`).join('; ')}.`,
    `Its answers: ${Object.entries(report.answers).sort((left, right) => right[1] - left[1]).map(([answer, count]) => `${answer} ×${count}`).join(', ') || 'none'}.`, '',
    ...(Array.isArray(report.details) ? bombCases(report.details) : []),
    `(RSS target: gateway + agents ≤ --budget-mib ${budgetMiB} + 200 MiB.)`, '',
  ];
}

/** The body bombs' per-case table (issue 19's report). */
function bombCases(cases: any[]): string[] {
  return [
    '| case | attempts | p50 ms | p99 ms | max ms | answers | still running at the end (for ms) |', '|---|---:|---:|---:|---:|---|---|',
    ...cases.map((entry) => `| ${entry.id} | ${entry.attempts} | ${entry.attempts ? entry.p50Ms : '–'} | ${entry.attempts ? entry.p99Ms : '–'} | ${entry.attempts ? entry.maxMs : '–'} | ` +
      `${Object.entries(entry.answers as Record<string, number>).sort((left, right) => right[1] - left[1]).map(([answer, count]) => `${answer} ×${count}`).join(', ') || '–'} | ${entry.stillRunningAtEnd ? `${entry.stillRunningAtEnd} (${entry.stillRunningForMs})` : ''} |`), '',
  ];
}
