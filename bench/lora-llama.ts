/**
 * The llama.cpp piece of `npm run bench:lora` (issue 38): on real llama.cpp (CPU, one thread)
 * with a generated GGUF model and generated GGUF LoRA adapters, the engine the agent runs
 * (LlamaCppEngine, in this process) measures
 * - time to first token of a streamed greedy chat request on the base model, and with an
 *   adapter already resident (its context held);
 * - the cold load of an adapter not held: fetch from a local HTTP server (as from storage),
 *   sha256 check, the check against the base model, and the context that applies it (the
 *   residency's `load_ms`), and the cold request's time to first token, load included;
 * - resident memory before and after loading max_loras adapters, and after evicting them all.
 * Medians of `rounds` each. `runLoraLlamaBench` is what `bench:lora` calls; run alone,
 * `node dist/bench/lora-llama.js [--embedding 64 --layers 2 --rounds 9 --max-loras 4]` writes
 * bench/results/<date>-lora-llama.md.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import type { AdapterRef } from '../proto/worker/v1/index';
import { AdapterStore } from '../worker-agent/engines/adapter-store';
import { silentLogger } from '../worker-agent/agent-logger';
import { JobCancellation } from '../worker-agent/job-cancellation';
import { LlamaCppEngine } from '../worker-agent/llama/llama-cpp-engine';
import { writeTinyGguf } from '../worker-agent/llama/tiny-gguf';
import { tinyLoraGguf } from '../worker-agent/llama/tiny-lora-gguf';
import { describeMachine } from './machine';
import { median } from './report';
import { PROJECT_ROOT } from './targets';

export interface LoraLlamaOptions {
  /** Hidden size and layers of the generated model (64 / 2 is the tests' tiny model). */
  readonly embedding?: number;
  readonly layers?: number;
  readonly rank?: number;
  readonly rounds?: number;
  readonly maxLoras?: number;
  /** Tokens each request generates. */
  readonly tokens?: number;
}

export interface LoraLlamaResult {
  readonly model: string;
  readonly rounds: number;
  readonly baseTtftMs: number;
  readonly residentTtftMs: number;
  readonly coldLoadMs: number;
  readonly coldTtftMs: number;
  readonly adapterBytes: number;
  /** Adapters whose weights llama.cpp holds (null: this node-llama-cpp does not say). */
  readonly adapterWeightsHeld: { readonly withAdapters: number | null; readonly afterEviction: number | null };
  readonly rssMiB: { readonly base: number; readonly withAdapters: number; readonly afterEviction: number };
  readonly loadAverage: readonly number[];
}

export async function runLoraLlamaBench(options: LoraLlamaOptions = {}): Promise<LoraLlamaResult> {
  const embedding = options.embedding ?? 64;
  const layers = options.layers ?? 2;
  const rank = options.rank ?? 8;
  const rounds = options.rounds ?? 9;
  const maxLoras = options.maxLoras ?? 4;
  const tokens = options.tokens ?? 16;
  const heads = Math.max(4, embedding / 64);
  const kvHeads = Math.max(2, embedding / 256);
  const feedForward = Math.round((embedding * 8) / 3 / 64) * 64 || 128;
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-lora-llama-'));
  const modelPath = writeTinyGguf(path.join(workDir, 'model.gguf'), { contextLength: 1024, embeddingLength: embedding, layers, heads, kvHeads, feedForwardLength: feedForward });
  const adapterFiles = new Map<string, Buffer>();
  const server = http.createServer((request, response) => response.end(adapterFiles.get((request.url ?? '').slice(1)) ?? ''));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let adapters = 0;
  const newAdapter = (): AdapterRef => {
    adapters += 1;
    const bytes = tinyLoraGguf({ seed: adapters, rank, embeddingLength: embedding, layers, heads, kvHeads, feedForwardLength: feedForward });
    adapterFiles.set(`a${adapters}`, bytes);
    return {
      name: `ad_${adapters}.r1`, displayName: `bench-${adapters}`, format: 'ADAPTER_FORMAT_GGUF', source: `${url}/a${adapters}`,
      sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length, rank, scale: 0,
    };
  };
  const store = new AdapterStore({ directory: path.join(workDir, 'adapters'), maxBytes: 1 << 30, fetchTimeoutMs: 30_000 });
  const engine = new LlamaCppEngine({
    modelPath, threads: 1, contextSize: 256, parallel: 1, adapters: { capacity: { maxLoras, maxCpuLoras: 0, maxLoraRank: 256 }, store },
  }, silentLogger);
  try {
    await engine.start();
    /** Milliseconds from the request to its first content chunk. */
    let requests = 0;
    const ttft = async (adapter?: AdapterRef): Promise<number> => {
      // A prompt of its own each time: the prefix cache would otherwise leave one token to evaluate.
      requests += 1;
      const body = { messages: [{ role: 'user', content: `${requests} Tell me about adapters` }], max_tokens: tokens, temperature: 0, stream: true };
      const started = process.hrtime.bigint();
      let first = 0;
      await engine.run({
        jobId: 'bench', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from(JSON.stringify(body)), stream: true, includeUsage: false, model: 'local/bench', adapter,
      }, {
        chunk: (data) => {
          // The first chunk is the role with empty content, sent before the prompt is evaluated.
          if (!first && /"content":"[^"]/.test(data.toString('utf8'))) first = Number(process.hrtime.bigint() - started) / 1e6;
          return undefined;
        },
        output: () => undefined,
      }, new JobCancellation());
      return first;
    };
    // Warm-up: the base context's first evaluation, and one adapter load path.
    await ttft();
    await ttft(newAdapter());
    const rss = () => Math.round((process.memoryUsage().rss / 2 ** 20) * 10) / 10;
    const base: number[] = [];
    const resident: number[] = [];
    const coldLoad: number[] = [];
    const coldTtft: number[] = [];
    const held = newAdapter();
    await ttft(held);
    for (let round = 0; round < rounds; round += 1) {
      base.push(await ttft());
      resident.push(await ttft(held));
      const cold = newAdapter();
      coldTtft.push(await ttft(cold));
      coldLoad.push(engine.adapters!.snapshot().find((entry) => entry.name === cold.name)!.loadMs);
      // Keep `held` the most recently used so the cold ones are the ones evicted.
      await ttft(held);
    }
    const rssBase = rss();
    for (let index = 0; index < maxLoras; index += 1) await ttft(newAdapter());
    const rssWith = rss();
    const weightsHeld = engine.loras!.heldWeights();
    await engine.loras!.close();
    const rssAfter = rss();
    const weightsAfterEviction = engine.loras!.heldWeights();
    return {
      model: `generated llama ${embedding}-dim, ${layers} layers, byte vocabulary; adapters rank ${rank} on attn_q/k/v and ffn_gate/up`,
      rounds, baseTtftMs: median(base), residentTtftMs: median(resident), coldLoadMs: median(coldLoad), coldTtftMs: median(coldTtft),
      adapterBytes: adapterFiles.get('a1')!.length, adapterWeightsHeld: { withAdapters: weightsHeld, afterEviction: weightsAfterEviction }, rssMiB: { base: rssBase, withAdapters: rssWith, afterEviction: rssAfter }, loadAverage: os.loadavg(),
    };
  } finally {
    await engine.close();
    server.close();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** @param command how the run was started, for the record's first line */
export function loraLlamaMarkdown(results: readonly LoraLlamaResult[], command = 'node dist/bench/lora-llama.js'): string {
  const machine = describeMachine();
  const ms = (value: number) => value.toFixed(2);
  const lines = [
    '# LoRA adapters on real llama.cpp (issue 38)',
    '',
    `Measured with \`${command}\` (bench/lora-llama.ts) on ${machine.cpu}, ${machine.cores} cores, ${machine.memoryGiB} GiB, Node ${machine.node}, commit ${machine.gitSha}.`,
    'llama.cpp on the CPU, one thread, the engine the agent runs (LlamaCppEngine) in the bench\'s process; streamed greedy chat requests.',
    'Cold load = fetch from a local HTTP server + sha256 + check against the base model + a context applying the adapter (the heartbeat\'s `load_ms`).',
    '',
    '| model | rounds | base TTFT ms | resident adapter TTFT ms | cold load ms | cold request TTFT ms | adapter file | RSS MiB: base / with max_loras adapters / all evicted | adapters in llama.cpp memory: loaded / evicted | load average (1/5/15 min) |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...results.map((result) => `| ${result.model} | ${result.rounds} | ${ms(result.baseTtftMs)} | ${ms(result.residentTtftMs)} | ${ms(result.coldLoadMs)} | ${ms(result.coldTtftMs)} | ${(result.adapterBytes / 1024).toFixed(0)} KiB | ${result.rssMiB.base} / ${result.rssMiB.withAdapters} / ${result.rssMiB.afterEviction} | ${result.adapterWeightsHeld.withAdapters ?? '–'} / ${result.adapterWeightsHeld.afterEviction ?? '–'} | ${result.loadAverage.map((value) => value.toFixed(2)).join(' / ')} |`),
    '',
    'Medians; each request has a prompt of its own (no prefix reuse). A resident adapter costs about what the base model costs (its own',
    'context, nothing to load); a cold one adds its load once, which is what residency-aware routing avoids. An eviction disposes the',
    'context and llama.cpp frees the adapter\'s weights (the count above); RSS barely falls because the allocator keeps freed pages for',
    'reuse, so the next load reuses them instead of growing. Other helpers\' tests shared this 2-core machine: the load average is part of',
    'the numbers.',
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { embedding: { type: 'string' }, layers: { type: 'string' }, rounds: { type: 'string', default: '9' }, 'max-loras': { type: 'string', default: '4' }, out: { type: 'string' } },
  });
  const configs = values.embedding
    ? [{ embedding: Number(values.embedding), layers: Number(values.layers ?? 2) }]
    : [{ embedding: 64, layers: 2 }, { embedding: 512, layers: 8 }];
  const results: LoraLlamaResult[] = [];
  for (const config of configs) results.push(await runLoraLlamaBench({ ...config, rounds: Number(values.rounds), maxLoras: Number(values['max-loras']) }));
  const markdown = loraLlamaMarkdown(results);
  const file = values.out ?? path.join(PROJECT_ROOT, 'bench/results', `${new Date().toISOString().slice(0, 10)}-lora-llama.md`);
  fs.writeFileSync(file, markdown);
  console.log(`${markdown}\nwrote ${path.relative(PROJECT_ROOT, file)}`);
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
