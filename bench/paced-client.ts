/**
 * Open-loop load at a fixed rate (requests start on schedule whether or not earlier ones have
 * finished), measuring full latency and time to first body byte. Prints one JSON line.
 * Run: node dist/bench/paced-client.js URL --rate 500 --seconds 10 [--stream] [--key K] [--stream-ratio 0.5]
 */
import http from 'node:http';
import { parseArgs } from 'node:util';

export interface PacedResult {
  sent: number;
  completed: number;
  failed: number;
  rate: number;
  p50Ms: number;
  p99Ms: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
}

export function percentile(sorted: number[], fraction: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(fraction * sorted.length))];
}

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { rate: { type: 'string', default: '500' }, seconds: { type: 'string', default: '10' }, stream: { type: 'boolean', default: false },
      key: { type: 'string', default: 'none' }, 'stream-ratio': { type: 'string' }, chunks: { type: 'string', default: '20' } },
  });
  const url = new URL(positionals[0]);
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const streamRatio = values['stream-ratio'] !== undefined ? Number(values['stream-ratio']) : values.stream ? 1 : 0;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1_024 });
  const body = (stream: boolean) => Buffer.from(JSON.stringify({
    model: 'meta-llama/Llama-3.1-8B-Instruct', messages: [{ role: 'user', content: 'Hello there, how are you?' }], max_tokens: 16,
    ...(stream ? { stream: true, bench_chunks: Number(values.chunks) } : {}),
  }));
  const bodies = [body(false), body(true)];
  const latencies: number[] = [];
  const ttfbs: number[] = [];
  let sent = 0;
  let failed = 0;
  const total = Math.round(rate * seconds);
  const startedAt = performance.now();
  await new Promise<void>((resolve) => {
    let outstanding = 0;
    let scheduled = 0;
    const fire = () => {
      // Streams interleave evenly: every k-th request with k = 1 / ratio.
      const stream = streamRatio >= 1 || (streamRatio > 0 && sent % Math.round(1 / streamRatio) === 0);
      const payload = bodies[stream ? 1 : 0];
      const begin = performance.now();
      sent++;
      outstanding++;
      const request = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': payload.length, authorization: `Bearer ${values.key}` } }, (response) => {
        let first = 0;
        response.on('data', () => { if (!first) first = performance.now(); });
        response.on('end', () => {
          const end = performance.now();
          if (response.statusCode === 200) {
            latencies.push(end - begin);
            ttfbs.push((first || end) - begin);
          } else failed++;
          if (--outstanding === 0 && scheduled >= total) resolve();
        });
      });
      request.on('error', () => {
        failed++;
        if (--outstanding === 0 && scheduled >= total) resolve();
      });
      request.end(payload);
    };
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - startedAt) / 1000) * rate) + 1);
      while (scheduled < due) {
        scheduled++;
        fire();
      }
      if (scheduled < total) setTimeout(tick, 1);
      else if (outstanding === 0) resolve();
    };
    tick();
  });
  const elapsed = (performance.now() - startedAt) / 1000;
  latencies.sort((a, b) => a - b);
  ttfbs.sort((a, b) => a - b);
  const result: PacedResult = {
    sent, completed: latencies.length, failed, rate: latencies.length / elapsed,
    p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99), ttfbP50Ms: percentile(ttfbs, 0.5), ttfbP99Ms: percentile(ttfbs, 0.99),
  };
  process.stdout.write(`${JSON.stringify(result)}\n`);
  agent.destroy();
}

if (require.main === module) void main();
