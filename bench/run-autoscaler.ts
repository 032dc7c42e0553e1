/**
 * `npm run bench:autoscaler`: the autoscaler against a fixed-max deployment on a simulated
 * bursty day, for an LLM and a diffusion deployment. Nothing runs on a GPU or a socket:
 * `simulateLoad` replays the trace tick by tick and drives the real decision core, so the
 * result depends only on the flags and the code, and a run takes seconds. Each deployment is
 * also replayed with one autoscaler option changed at a time: the evidence behind the defaults.
 * Flags: --hours 24 --seed 42 --tick-ms 250
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Autoscaler } from '../control-plane/autoscaling/autoscaler';
import type { AutoscalerOptions } from '../control-plane/autoscaling/autoscaler-options';
import { simulateLoad, type LoadSimulationResult } from '../control-plane/autoscaling/load-simulator';
import { burstyDiurnalTrace, type Burst } from '../control-plane/autoscaling/load-traces';
import type { ScalingDecision } from '../control-plane/autoscaling/scaling-decision';
import { PROJECT_ROOT } from '../control-plane/project-root';

const PLATFORM = { replicaStartupMs: 60_000, decisionIntervalMs: 5_000, queueingTargetMs: 2_000 };
/** A burst every 40 min on average (exponential gaps), ×1.5–2.5 the diurnal rate for 30 s to 5 min. */
const BURSTS = { meanSecondsBetweenBursts: 2_400, burstMultiplier: [1.5, 2.5] as const, burstSeconds: [30, 300] as const };
/** Diurnal cosine from `trough` (02:00) to `peak` (14:00); maxReplicas covers the largest burst at the peak. */
const PROFILES = [
  { name: 'LLM', targetConcurrency: 32, serviceTimeMs: 10_000, minReplicas: 1, maxReplicas: 24, trough: 2, peak: 30 },
  { name: 'diffusion', targetConcurrency: 1, serviceTimeMs: 4_000, minReplicas: 1, maxReplicas: 16, trough: 0.1, peak: 1.5 },
];
const VARIANTS: Array<[string, AutoscalerOptions]> = [
  ['windowMs 5 s', { windowMs: 5_000 }],
  ['windowMs 30 s', { windowMs: 30_000 }],
  ['scaleUpStabilizationMs 30 s', { scaleUpStabilizationMs: 30_000 }],
  ['scaleDownStabilizationMs 60 s', { scaleDownStabilizationMs: 60_000 }],
  ['scaleDownStabilizationMs 900 s', { scaleDownStabilizationMs: 900_000 }],
  ['maxScaleDownStep 4', { maxScaleDownStep: 4 }],
  ['tolerance 0', { tolerance: 0 }],
  ['tolerance 0.25', { tolerance: 0.25 }],
];

type Summary = ReturnType<typeof summarizeRun>;

function main(): void {
  const { values } = parseArgs({ options: {
    hours: { type: 'string', default: '24' }, seed: { type: 'string', default: '42' }, 'tick-ms': { type: 'string', default: '250' },
  } });
  const seconds = Math.round(Number(values.hours) * 3600);
  const seed = Number(values.seed);
  const tickMs = Number(values['tick-ms']);
  const started = performance.now();
  // The burst schedule depends on the seed only: the same bursts hit both deployments.
  const bursts = burstyDiurnalTrace({ seconds, trough: 0, peak: 0, ...BURSTS, seed }).bursts;
  // A burst's aftermath lasts a replica boot plus draining the backlog: call it 2 minutes.
  const afterBurst = new Uint8Array(seconds);
  for (const burst of bursts) afterBurst.fill(1, burst.atSecond, Math.min(seconds, burst.atSecond + burst.seconds + 120));
  const summarize = (result: LoadSimulationResult) => summarizeRun(result, afterBurst);
  let examples: ScalingDecision[] = [];
  const profiles = PROFILES.map(({ name, trough, peak, ...deployment }) => {
    const { trace } = burstyDiurnalTrace({ seconds, trough, peak, ...BURSTS, seed });
    const run = (autoscale: boolean, options: AutoscalerOptions = {}) => simulateLoad({
      trace, autoscaler: new Autoscaler(options), ...deployment, ...PLATFORM, tickMs, arrivalSeed: seed, autoscale,
      // The baseline is the platform's own "autoscale off" (pinned at min) with min = max.
      ...(autoscale ? {} : { minReplicas: deployment.maxReplicas, initialReplicas: deployment.maxReplicas }),
    });
    const autoscaled = run(true);
    if (examples.length === 0) examples = exampleDecisions(autoscaled.recordedDecisions);
    return {
      name, deployment,
      trace: { trough, peak, bursts: bursts.length, meanArrivalsPerSecond: round(trace.reduce((sum, rate) => sum + rate, 0) / seconds) },
      autoscaler: summarize(autoscaled), fixedMax: summarize(run(false)),
      variants: VARIANTS.map(([variant, options]) => ({ variant, options, ...summarize(run(true, options)) })),
    };
  });
  write({
    date: new Date().toISOString().slice(0, 10), gitSha: gitSha(), wallMs: Math.round(performance.now() - started),
    simulatedHours: seconds / 3600, seed, tickMs, platform: PLATFORM,
    bursts: { ...BURSTS, schedule: bursts.map((burst) => ({ ...burst, multiplier: round(burst.multiplier) })) },
    autoscalerOptions: new Autoscaler().options, profiles, examples,
  });
}

function summarizeRun(result: LoadSimulationResult, afterBurst: Uint8Array) {
  const overTargetAfterBursts = result.overQueueingTargetBySecond.reduce((sum, count, second) => sum + (afterBurst[second] ? count : 0), 0);
  return {
    gpuHours: round(result.gpuHours), requestsServed: result.requestsServed, requestsUnserved: result.requestsUnserved,
    requestsOverQueueingTarget: result.requestsOverQueueingTarget,
    overTargetPercent: round((100 * result.requestsOverQueueingTarget) / Math.max(1, result.requestsServed)),
    /** Share of the over-target requests that arrived during a burst or the 2 minutes after it. */
    overTargetAfterBurstsPercent: round((100 * overTargetAfterBursts) / Math.max(1, result.requestsOverQueueingTarget), 1),
    queueingDelayMs: result.queueingDelayMs, decisionsMade: result.decisions.length, decisionsRecorded: result.recordedDecisions.length,
    scaleUps: result.scaleUps, scaleDowns: result.scaleDowns, turnarounds: turnarounds(result.decisions),
    peakReplicas: Math.max(...result.decisions.map((decision) => decision.desiredReplicas)),
  };
}

/** Scale-ups right after a scale-down and vice versa: flapping. */
function turnarounds(decisions: ScalingDecision[]): number {
  const directions = decisions.filter((decision) => decision.action !== 'hold').map((decision) => decision.action);
  return directions.filter((direction, index) => index > 0 && direction !== directions[index - 1]).length;
}

/** One recorded decision per reason, to show what a user reads. */
function exampleDecisions(recorded: ScalingDecision[]): ScalingDecision[] {
  const byReason = new Map<string, ScalingDecision>();
  for (const decision of recorded) if (!byReason.has(decision.reason)) byReason.set(decision.reason, decision);
  return [...byReason.values()];
}

interface BenchResults {
  date: string;
  gitSha: string;
  wallMs: number;
  simulatedHours: number;
  seed: number;
  tickMs: number;
  platform: typeof PLATFORM;
  bursts: typeof BURSTS & { schedule: Burst[] };
  autoscalerOptions: Autoscaler['options'];
  profiles: Array<{
    name: string; deployment: Omit<(typeof PROFILES)[number], 'name' | 'trough' | 'peak'>;
    trace: { trough: number; peak: number; bursts: number; meanArrivalsPerSecond: number };
    autoscaler: Summary; fixedMax: Summary; variants: Array<Summary & { variant: string }>;
  }>;
  examples: ScalingDecision[];
}

function write(results: BenchResults): void {
  const stamp = `${results.date}-${results.gitSha}`;
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, `autoscaler-${stamp}.json`), JSON.stringify(results, null, 2));
  const header = [
    '| run | GPU-hours | served | over 2 s queueing target | of which in a burst (+2 min) | queueing p50 / p99 / max s | decisions made / recorded | scale-ups / -downs | turnarounds | peak replicas |',
    '|---|---:|---:|---:|---:|---|---:|---:|---:|---:|',
  ];
  const row = (name: string, summary: Summary) => `| ${name} | ${summary.gpuHours} | ${summary.requestsServed} | ` +
    `${summary.requestsOverQueueingTarget} (${summary.overTargetPercent} %) | ${summary.overTargetAfterBurstsPercent} % | ${[summary.queueingDelayMs.p50, summary.queueingDelayMs.p99, summary.queueingDelayMs.max].map((ms) => ms / 1000).join(' / ')} | ` +
    `${summary.decisionsMade} / ${summary.decisionsRecorded} | ${summary.scaleUps} / ${summary.scaleDowns} | ${summary.turnarounds} | ${summary.peakReplicas} |`;
  const { platform, bursts } = results;
  const markdown = [
    `# Autoscaler benchmark ${stamp}`, '',
    `Simulated ${results.simulatedHours} h on a ${results.tickMs} ms tick (seed ${results.seed}), all runs replayed in ${(results.wallMs / 1000).toFixed(1)} s of wall time. ` +
    `Per deployment: a diurnal cosine from the trough (02:00) to the peak (14:00) in req/s, with bursts on top (exponential gaps, mean ${bursts.meanSecondsBetweenBursts / 60} min; ` +
    `×${bursts.burstMultiplier.join('–')} for ${bursts.burstSeconds.join('–')} s; the same schedule for both), Poisson arrivals, a fixed service time per request, ` +
    `one slot per unit of target concurrency. A replica serves ${platform.replicaStartupMs / 1000} s after it is ordered and is paid for from the order (and for one service time of draining); ` +
    `a decision every ${platform.decisionIntervalMs / 1000} s. Fixed-max is the platform's autoscale off with min = max.`, '',
    `Autoscaler defaults: ${Object.entries(results.autoscalerOptions).map(([name, value]) => `${name} ${value}`).join(', ')}.`, '',
    ...results.profiles.flatMap((profile) => [
      `## ${profile.name}: target ${profile.deployment.targetConcurrency}, ${profile.deployment.serviceTimeMs / 1000} s per request, replicas ${profile.deployment.minReplicas}–${profile.deployment.maxReplicas}; ` +
      `${profile.trace.trough}–${profile.trace.peak} req/s, ${profile.trace.bursts} bursts, mean ${profile.trace.meanArrivalsPerSecond} req/s`, '',
      ...header, row('**autoscaler**', profile.autoscaler), row(`fixed at max (${profile.deployment.maxReplicas})`, profile.fixedMax),
      `| *autoscaler / fixed* | *${Math.round((100 * profile.autoscaler.gpuHours) / profile.fixedMax.gpuHours)} %* | | | | | | | | |`, '',
      'One option changed at a time:', '', ...header, ...profile.variants.map((variant) => row(variant.variant, variant)), '',
    ]),
    '## What the recorded decisions say (first of each reason, LLM)', '',
    ...results.examples.map((decision) => `- t = ${Math.round(decision.at / 1000)} s, \`${decision.reason}\`: ${decision.explanation}`), '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `autoscaler-${stamp}.md`), markdown);
  console.log(`${markdown}\nwrote bench/results/autoscaler-${stamp}.{json,md}`);
}

function gitSha(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: PROJECT_ROOT }).toString().trim();
  } catch {
    return 'unknown';
  }
}

function round(value: number, digits = 2): number {
  return Math.round(value * 10 ** digits) / 10 ** digits;
}

main();
