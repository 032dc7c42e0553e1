/**
 * `npm run bench:soak`: our path alone under a steady moderate load (paced, half streams): a
 * warm-up (2 min by default: V8 sizes its heap in the first minute or two), then 10 measured
 * minutes, sampling RSS of the server and agent every 10 s. Passes when neither grows more
 * than 10 % over the measured minutes and no request fails.
 * Flags: --minutes 10 --rate 300 --warmup-minutes 2
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { describeMachine } from './machine';
import type { PacedResult } from './paced-client';
import { rssBytes, run } from './processes';
import { oursTarget, PROJECT_ROOT, startUpstreamProcess } from './targets';
import { freshResultName } from './report';

interface Sample { atSeconds: number; gatewayMiB: number; agentMiB: number; gatewayHeapMiB: number | null }

/**
 * The gateway's V8 heap in use, from its own /metrics (loopback needs no token). RSS alone
 * cannot tell a leak from a heap that sized itself; live heap that keeps its level can.
 */
async function gatewayHeapMiB(origin: string): Promise<number | null> {
  try {
    const text = await (await fetch(`${origin}/metrics`)).text();
    const match = /^inference_nodejs_heap_size_used_bytes (\d+(?:\.\d+)?)/m.exec(text);
    return match ? Math.round(Number(match[1]) / 1024 / 102.4) / 10 : null;
  } catch {
    return null;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { minutes: { type: 'string', default: '10' }, rate: { type: 'string', default: '300' }, 'warmup-minutes': { type: 'string', default: '2' } } });
  const warmupSeconds = Number(values['warmup-minutes']) * 60;
  const seconds = Number(values.minutes) * 60 + warmupSeconds;
  const upstream = await startUpstreamProcess(null);
  const ours = await oursTarget(upstream, null);
  const samples: Sample[] = [];
  let result: PacedResult;
  try {
    const startedAt = Date.now();
    const sampler = setInterval(() => {
      const roles = ours.processes();
      const mib = (pids: number[]) => Math.round(pids.reduce((sum, pid) => sum + rssBytes(pid), 0) / 1024 / 102.4) / 10;
      const sample: Sample = { atSeconds: Math.round((Date.now() - startedAt) / 1000), gatewayMiB: mib(roles.gateway), agentMiB: mib(roles.agent), gatewayHeapMiB: null };
      samples.push(sample);
      void gatewayHeapMiB(new URL(ours.url).origin).then((heap) => { sample.gatewayHeapMiB = heap; });
    }, 10_000);
    result = JSON.parse(await run(null, process.execPath, [path.join(__dirname, 'paced-client.js'), ours.url, '--rate', values.rate, '--seconds', String(seconds), '--key', ours.key, '--stream-ratio', '0.5'])) as PacedResult;
    clearInterval(sampler);
  } finally {
    await ours.stop();
    await upstream.stop();
  }
  const steady = samples.filter((sample) => sample.atSeconds >= warmupSeconds);
  const growth = (pick: (sample: Sample) => number) => steady.length < 2 ? NaN : ((pick(steady.at(-1)!) - pick(steady[0])) / pick(steady[0])) * 100;
  const gatewayGrowth = growth((sample) => sample.gatewayMiB);
  const agentGrowth = growth((sample) => sample.agentMiB);
  const passed = gatewayGrowth <= 10 && agentGrowth <= 10 && result.failed === 0;
  // A leak keeps climbing; a heap that sized itself is flat: the trend of the second half tells them apart.
  const secondHalf = steady.slice(Math.floor(steady.length / 2));
  const trend = (pick: (sample: Sample) => number) => secondHalf.length < 2 ? NaN
    : (pick(secondHalf.at(-1)!) - pick(secondHalf[0])) / ((secondHalf.at(-1)!.atSeconds - secondHalf[0].atSeconds) / 60);
  const gatewayTrend = trend((sample) => sample.gatewayMiB);
  const agentTrend = trend((sample) => sample.agentMiB);
  const heapMedian = (window: Sample[]) => median(window.map((sample) => sample.gatewayHeapMiB).filter((heap): heap is number => heap !== null));
  const heapFirstMinute = heapMedian(steady.filter((sample) => sample.atSeconds < warmupSeconds + 60));
  const heapLastMinute = heapMedian(steady.filter((sample) => sample.atSeconds > steady.at(-1)!.atSeconds - 60));
  const machine = describeMachine();
  const directory = path.join(PROJECT_ROOT, 'bench/results');
  const stamp = freshResultName(directory, `soak-${new Date().toISOString().slice(0, 10)}-${machine.gitSha}`);
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, `${stamp}.json`), JSON.stringify({ machine, minutes: Number(values.minutes), rate: Number(values.rate), result, samples, gatewayGrowth, agentGrowth, gatewayTrendMiBPerMinute: gatewayTrend, agentTrendMiBPerMinute: agentTrend, gatewayHeapFirstMinuteMiB: heapFirstMinute, gatewayHeapLastMinuteMiB: heapLastMinute, passed }, null, 2));
  const markdown = [
    `# Soak ${stamp}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores; Node ${machine.node}. Load: ${values.rate} req/s paced for ${values['warmup-minutes']} min of warm-up + ${values.minutes} measured min, every other request a 20-chunk stream.`, '',
    `Requests: ${result.completed} completed, ${result.failed} failed; p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms.`,
    `RSS after ${warmupSeconds} s warm-up → end: gateway ${steady[0]?.gatewayMiB} → ${steady.at(-1)?.gatewayMiB} MiB (${gatewayGrowth.toFixed(1)} %), agent ${steady[0]?.agentMiB} → ${steady.at(-1)?.agentMiB} MiB (${agentGrowth.toFixed(1)} %).`,
    `Trend over the second half of the measured minutes: gateway ${gatewayTrend.toFixed(2)} MiB/min, agent ${agentTrend.toFixed(2)} MiB/min.`,
    `Gateway V8 heap in use, median of the first vs the last measured minute: ${heapFirstMinute.toFixed(1)} → ${heapLastMinute.toFixed(1)} MiB (sampled at random points of the GC cycle, so single samples swing).`,
    `Result: ${passed ? 'PASS' : 'FAIL'} (target: no growth beyond 10 %, no failed request).`, '',
    '| s | gateway RSS MiB | agent RSS MiB | gateway V8 heap used MiB |', '|---:|---:|---:|---:|',
    ...samples.map((sample) => `| ${sample.atSeconds} | ${sample.gatewayMiB} | ${sample.agentMiB} | ${sample.gatewayHeapMiB ?? '–'} |`), '',
  ].join('\n');
  fs.writeFileSync(path.join(directory, `${stamp}.md`), markdown);
  console.log(markdown);
  process.exit(passed ? 0 : 1);
}

function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
