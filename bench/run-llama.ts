/**
 * `npm run bench:llama`: what serving a GGUF model through the platform costs per token.
 * The same model, thread count, prompt and greedy sampling run two ways, interleaved:
 * - direct: node-llama-cpp in this process (evaluate + detokenize each token, as a streaming
 *   app would);
 * - platform: a server process (`LOCAL_MODEL_PATH`) streaming /v1/completions: client →
 *   gateway → gRPC → agent process → llama.cpp, SSE back.
 * Reports time to first token and decode tokens/s (first → last token) as medians, and the
 * per-token overhead of the platform path. End-of-generation tokens are banned on both sides
 * (logit bias -100) so every run makes exactly --tokens tokens.
 * Flags: --model FILE (default: a generated model) --embedding 64 --layers 2 (its size: 64/2 is the
 *        tests' tiny model, 512/8 a ~26M-parameter one with a real model's per-token cost)
 *        --tokens 256 --rounds 7 --threads 1 --context 2048 --prompt TEXT
 *        --database-url URL (default: embedded PostgreSQL)
 */
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Token } from 'node-llama-cpp';
import { writeTinyGguf } from '../worker-agent/llama/tiny-gguf';
import { describeMachine } from './machine';
import { saveResults } from './report';
import { percentile } from './paced-client';
import { ServerProcess, until } from './server-process';

interface Run {
  readonly ttftMs: number;
  readonly tokens: number;
  /** (tokens - 1) / (last token time - first token time). */
  readonly decodeTokensPerSecond: number;
  readonly totalMs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      model: { type: 'string' }, embedding: { type: 'string', default: '64' }, layers: { type: 'string', default: '2' }, tokens: { type: 'string', default: '256' }, rounds: { type: 'string', default: '7' },
      threads: { type: 'string', default: '1' }, context: { type: 'string', default: '2048' },
      prompt: { type: 'string', default: 'The platform streams every token as soon as llama.cpp has it. Once upon a time' },
      'database-url': { type: 'string' },
    },
  });
  const tokens = Number(values.tokens);
  const rounds = Number(values.rounds);
  const threads = Number(values.threads);
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-llama-'));
  fs.chmodSync(workDir, 0o755);
  const embedding = Number(values.embedding);
  const layers = Number(values.layers);
  const generated = `generated llama, ${embedding}-dim, ${layers} layers, byte vocabulary`;
  const modelPath = values.model
    ? path.resolve(values.model)
    : writeTinyGguf(path.join(workDir, `generated-${embedding}x${layers}.gguf`), {
      contextLength: Number(values.context), embeddingLength: embedding, layers, heads: Math.max(4, embedding / 64), kvHeads: Math.max(2, embedding / 256),
      feedForwardLength: Math.round((embedding * 8) / 3 / 64) * 64 || 128,
    });
  const direct = await DirectLlama.load(modelPath, threads, Number(values.context));
  const platform = await PlatformServer.start({ modelPath, threads, context: Number(values.context), databaseUrl: values['database-url'] });
  try {
    const banned = direct.endOfGenerationTokens();
    console.log(`model ${path.basename(modelPath)}, ${tokens} tokens, ${rounds} rounds, ${threads} thread(s); warming up`);
    await direct.run(values.prompt, tokens, banned);
    await platform.run(values.prompt, tokens, banned);
    const runs = { direct: [] as Run[], platform: [] as Run[] };
    const loadBefore = os.loadavg()[0];
    for (let round = 0; round < rounds; round++) {
      // Alternate the order so neither side always runs on a freshly idle machine.
      const order = round % 2 === 0 ? (['direct', 'platform'] as const) : (['platform', 'direct'] as const);
      for (const side of order) {
        const run = side === 'direct' ? await direct.run(values.prompt, tokens, banned) : await platform.run(values.prompt, tokens, banned);
        if (run.tokens !== tokens) throw new Error(`${side} made ${run.tokens} tokens instead of ${tokens}`);
        runs[side].push(run);
      }
      console.log(`round ${round + 1}: direct ${format(runs.direct.at(-1)!)} | platform ${format(runs.platform.at(-1)!)}`);
    }
    write({
      machine: describeMachine(),
      // Other work on the machine shows up as noise in both columns: record how busy it was.
      loadAverage1m: { before: round(loadBefore), after: round(os.loadavg()[0]) },
      options: { model: values.model ? path.basename(modelPath) : generated, modelBytes: fs.statSync(modelPath).size, tokens, rounds, threads, context: Number(values.context), prompt: values.prompt, database: values['database-url'] ? 'external PostgreSQL' : 'embedded PostgreSQL 17' },
      versions: { engine: direct.version },
      direct: summarise(runs.direct),
      platform: summarise(runs.platform),
      runs,
    });
  } finally {
    await platform.stop();
    await direct.close();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** node-llama-cpp in this process, configured like the agent's engine. */
class DirectLlama {
  private constructor(private readonly library: typeof import('node-llama-cpp'), private readonly model: import('node-llama-cpp').LlamaModel,
    private readonly context: import('node-llama-cpp').LlamaContext, private readonly sequence: import('node-llama-cpp').LlamaContextSequence,
    readonly version: string) {}

  static async load(modelPath: string, threads: number, contextSize: number): Promise<DirectLlama> {
    const library = await import('node-llama-cpp');
    const llama = await library.getLlama({ gpu: false, build: 'never', maxThreads: threads, logLevel: library.LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
    const context = await model.createContext({ contextSize: Math.min(contextSize, model.trainContextSize), sequences: 1, threads });
    return new DirectLlama(library, model, context, context.getSequence(), `node-llama-cpp ${await library.getModuleVersion()} (llama.cpp ${llama.llamaCppRelease.release})`);
  }

  endOfGenerationTokens(): number[] {
    return [this.model.tokens.eos, this.model.tokens.eot].filter((token): token is Token => token !== null);
  }

  async run(prompt: string, count: number, banned: readonly number[]): Promise<Run> {
    // The same work the engine does per request: tokenize, reset the sequence, evaluate, detokenize.
    const startedAt = performance.now();
    const bos = this.model.tokens.bos;
    const text = this.model.tokenize(prompt, false);
    const promptTokens = bos !== null && this.model.tokens.shouldPrependBosToken ? [bos, ...text] : text;
    const bias = new this.library.TokenBias(this.model.tokenizer);
    for (const token of banned) bias.set(token as Token, { logit: -100 });
    await this.sequence.clearHistory();
    let first = 0;
    let last = 0;
    let made = 0;
    let output = '';
    for await (const token of this.sequence.evaluate(promptTokens, { temperature: 0, topK: 0, topP: 1, minP: 0, tokenBias: bias })) {
      output += this.model.detokenize([token]);
      last = performance.now();
      if (made === 0) first = last;
      if (++made >= count) break;
    }
    if (!output) throw new Error('no output');
    return runOf(startedAt, first, last, made);
  }

  async close(): Promise<void> {
    await this.context.dispose();
    await this.model.dispose();
  }
}

/** A server process serving the model on one llama-cpp agent (one sequence, like the direct side). */
class PlatformServer {
  private readonly port: number;

  private constructor(private readonly server: ServerProcess, private readonly slug: string, private readonly key: string) {
    this.port = Number(new URL(server.baseUrl).port);
  }

  static async start(options: { modelPath: string; threads: number; context: number; databaseUrl?: string }): Promise<PlatformServer> {
    const server = await ServerProcess.start({
      name: 'bench-llama', databaseUrl: options.databaseUrl,
      env: {
        LOCAL_MODEL_PATH: options.modelPath, ...(process.env.BENCH_AGENT_NODE_ARGS ? { LOCAL_AGENT_NODE_ARGS: process.env.BENCH_AGENT_NODE_ARGS } : {}), LOCAL_LLAMA_THREADS: String(options.threads),
        LOCAL_LLAMA_CONTEXT_SIZE: String(options.context), LOCAL_LLAMA_PARALLEL: '1',
      },
    });
    const slug = /\/d\/([^/\s]+)\/v1/.exec(server.output())![1];
    const platform = new PlatformServer(server, slug, server.key);
    await until(async () => (await platform.status()) === 200, 60_000, 'the llama-cpp replica');
    return platform;
  }

  private status(): Promise<number> {
    return new Promise((resolve) => {
      const request = http.request({ host: '127.0.0.1', port: this.port, path: `/d/${this.slug}/v1/completions`, method: 'POST', headers: this.headers() }, (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      });
      request.on('error', () => resolve(0));
      request.end(JSON.stringify({ prompt: 'warm', max_tokens: 1 }));
    });
  }

  private headers() {
    return { authorization: `Bearer ${this.key}`, 'content-type': 'application/json' };
  }

  /** One streamed completion; token times are when each content event's bytes arrive. */
  run(prompt: string, count: number, banned: readonly number[]): Promise<Run> {
    const body = JSON.stringify({
      prompt, max_tokens: count, temperature: 0, stream: true,
      logit_bias: Object.fromEntries(banned.map((token) => [String(token), -100])),
    });
    return new Promise((resolve, reject) => {
      const startedAt = performance.now();
      let first = 0;
      let last = 0;
      let made = 0;
      let buffer = '';
      const request = http.request({ host: '127.0.0.1', port: this.port, path: `/d/${this.slug}/v1/completions`, method: 'POST', headers: this.headers() }, (response) => {
        if (response.statusCode !== 200) {
          reject(new Error(`status ${response.statusCode}`));
          response.resume();
          return;
        }
        response.setEncoding('utf8');
        response.on('data', (part: string) => {
          const now = performance.now();
          buffer += part;
          let end: number;
          while ((end = buffer.indexOf('\n\n')) !== -1) {
            const event = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            // A content event carries a non-empty "text"; the finish event's text is "".
            if (!event.startsWith('data: {') || event.includes('"text":""')) continue;
            last = now;
            if (made === 0) first = now;
            made += 1;
          }
        });
        response.on('end', () => resolve(runOf(startedAt, first, last, made)));
      });
      request.on('error', reject);
      request.end(body);
    });
  }

  async stop(): Promise<void> {
    await this.server.stop();
  }
}

function runOf(startedAt: number, first: number, last: number, tokens: number): Run {
  return {
    ttftMs: round(first - startedAt),
    tokens,
    decodeTokensPerSecond: round(tokens > 1 ? (tokens - 1) / ((last - first) / 1000) : 0),
    totalMs: round(last - startedAt),
  };
}

function summarise(runs: readonly Run[]) {
  const median = (values: number[]) => round(percentile([...values].sort((left, right) => left - right), 0.5));
  const decode = median(runs.map((run) => run.decodeTokensPerSecond));
  return {
    ttftMs: median(runs.map((run) => run.ttftMs)),
    decodeTokensPerSecond: decode,
    microsecondsPerToken: round(1e6 / decode),
    totalMs: median(runs.map((run) => run.totalMs)),
  };
}

function format(run: Run): string {
  return `ttft ${run.ttftMs} ms, ${run.decodeTokensPerSecond} tok/s`;
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}


function write(results: any): void {
  const stamp = `${new Date().toISOString().slice(0, 10)}-${results.machine.gitSha}`;
  const name = `llama-${stamp}-${results.options.model.startsWith('generated') ? /(\d+)-dim, (\d+) layers/.exec(results.options.model)!.slice(1).join('x') : results.options.model.replace(/\.gguf$/, '')}`;
  const { direct, platform } = results;
  const overheadUs = round(platform.microsecondsPerToken - direct.microsecondsPerToken);
  const markdown = [
    `# llama.cpp through the platform vs direct, ${stamp}`, '',
    `Machine: ${results.machine.cpu}, ${results.machine.cores} cores (1-minute load ${results.loadAverage1m.before} before, ${results.loadAverage1m.after} after); Node ${results.machine.node}; ${results.versions.engine}; ${results.options.database}.`,
    `Model: ${results.options.model} (${(results.options.modelBytes / 1e6).toFixed(1)} MB); ${results.options.threads} thread(s); context ${results.options.context}; ` +
    `${results.options.tokens} tokens per run, greedy, EOS banned; medians of ${results.options.rounds} interleaved rounds after one warm-up each.`, '',
    '| path | time to first token (ms) | decode tokens/s | µs per token | whole stream (ms) |', '|---|---:|---:|---:|---:|',
    `| direct: node-llama-cpp in one process | ${direct.ttftMs} | ${direct.decodeTokensPerSecond} | ${direct.microsecondsPerToken} | ${direct.totalMs} |`,
    `| platform: client → gateway → gRPC → agent → llama.cpp (SSE) | ${platform.ttftMs} | ${platform.decodeTokensPerSecond} | ${platform.microsecondsPerToken} | ${platform.totalMs} |`, '',
    `Overhead of the platform path: **${round(platform.ttftMs - direct.ttftMs)} ms** on the first token, **${overheadUs} µs per token** after it ` +
    `(${round((overheadUs / direct.microsecondsPerToken) * 100)} % of the direct per-token time).`, '',
  ].join('\n');
  saveResults(name, results, markdown);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
