/**
 * `node dist/bench/pool-tracing.js RESULT.json [RESULT.json …]`: the ÷ base ratios of several
 * `bench:tracing` runs of the same code (their JSON files in bench/results), pooled: per scenario
 * and target, the median of every repetition's ratio with its 95 % interval (report.ts,
 * medianInterval). One run's repetitions spread by ±15 % on a shared VM; pooling two or three
 * runs narrows the interval more than a longer run would cost in one sitting.
 */
import fs from 'node:fs';
import { baseRatios, median, medianInterval, percentChange as percent } from './report';
import type { RunResult } from './scenario';

function main(files: string[]): void {
  if (files.length === 0) throw new Error('usage: node dist/bench/pool-tracing.js RESULT.json [RESULT.json …]');
  const results = files.map((file) => (JSON.parse(fs.readFileSync(file, 'utf8')) as { runs: RunResult[] }).runs);
  const scenarios = [...new Set(results.flatMap((runs) => runs.map((run) => run.scenario)))];
  const lines = ['| scenario | target | repetitions | ÷ base: median (95 % interval of the median) |', '|---|---|---:|---|'];
  for (const scenario of scenarios) {
    for (const target of [...new Set(results.flatMap((runs) => runs.map((run) => run.target)))].filter((name) => name !== 'base')) {
      // Ratios are paired within one run's repetition, never across runs.
      const ratios = results.flatMap((runs) => baseRatios(runs, scenario, target));
      if (ratios.length === 0) continue;
      const interval = medianInterval(ratios);
      lines.push(`| ${scenario} | ${target} | ${ratios.length} | ${percent(median(ratios))} (${interval ? `${percent(interval.low)} to ${percent(interval.high)}, ${(interval.confidence * 100).toFixed(1)} %` : 'too few repetitions'}) |`);
    }
  }
  console.log(lines.join('\n'));
}

main(process.argv.slice(2));
