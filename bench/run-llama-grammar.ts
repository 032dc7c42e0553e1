/**
 * `npm run bench:llama-grammar`: what a JSON-schema grammar costs llama.cpp per token. The
 * agent's own `LlamaCppEngine`, in this process, streams the same chat prompt with the same
 * `max_tokens` two ways, interleaved round by round:
 * - unconstrained (end-of-generation tokens banned with logit bias -100);
 * - under `response_format: json_schema`, a schema the answer cannot finish within
 *   `max_tokens` (an array of at least 1,000 records of a string, a number, a boolean and an
 *   enum), so both make exactly --tokens tokens and the grammar works through strings,
 *   numbers, keys and punctuation as a real structured answer does.
 * Reports median decode tokens/s (first → last token) and the median of each round's ratio; the target is ≥ 0.8.
 * Flags: --embedding 64 --layers 2 (model size, as bench:llama) --tokens 256 --rounds 7
 *        --threads 1 --context 2048
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { silentLogger } from '../worker-agent/agent-logger';
import { LlamaCppEngine } from '../worker-agent/llama/llama-cpp-engine';
import { JobCancellation } from '../worker-agent/job-cancellation';
import { TINY_SPECIAL_TOKENS, writeTinyGguf } from '../worker-agent/llama/tiny-gguf';
import { describeMachine } from './machine';
import { percentile } from './paced-client';
import { saveResults } from './report';

const SCHEMA = {
  type: 'object',
  properties: {
    records: {
      type: 'array', minItems: 1000,
      items: {
        type: 'object', additionalProperties: false, required: ['name', 'score', 'active', 'kind'],
        properties: { name: { type: 'string', maxLength: 12 }, score: { type: 'number' }, active: { type: 'boolean' }, kind: { enum: ['alpha', 'beta', 'gamma'] } },
      },
    },
  },
  required: ['records'], additionalProperties: false,
};

interface Run {
  readonly tokens: number;
  /** CPU time of this process (llama.cpp's thread included) per token: less sensitive to other load than wall time. */
  readonly cpuMicrosecondsPerToken: number;
  readonly decodeTokensPerSecond: number;
  readonly ttftMs: number;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      embedding: { type: 'string', default: '64' }, layers: { type: 'string', default: '2' }, tokens: { type: 'string', default: '256' },
      rounds: { type: 'string', default: '7' }, threads: { type: 'string', default: '1' }, context: { type: 'string', default: '2048' },
    },
  });
  const tokens = Number(values.tokens);
  const rounds = Number(values.rounds);
  const embedding = Number(values.embedding);
  const layers = Number(values.layers);
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-llama-grammar-'));
  const modelPath = writeTinyGguf(path.join(workDir, `generated-${embedding}x${layers}.gguf`), {
    contextLength: Number(values.context), embeddingLength: embedding, layers, heads: Math.max(4, embedding / 64), kvHeads: Math.max(2, embedding / 256),
    feedForwardLength: Math.round((embedding * 8) / 3 / 64) * 64 || 128,
  });
  const engine = new LlamaCppEngine({ modelPath, threads: Number(values.threads), contextSize: Number(values.context), parallel: 1, prefixCache: false }, silentLogger);
  await engine.start();
  const messages = [{ role: 'user', content: 'List the records of the inventory as JSON, one object per item.' }];
  const banned = { [TINY_SPECIAL_TOKENS.endOfText]: -100, [TINY_SPECIAL_TOKENS.imEnd]: -100 };
  const bodies = {
    unconstrained: { messages, max_tokens: tokens, temperature: 0, logit_bias: banned, stream: true, stream_options: { include_usage: true } },
    grammar: { messages, max_tokens: tokens, temperature: 0, stream: true, stream_options: { include_usage: true }, response_format: { type: 'json_schema', json_schema: { name: 'inventory', schema: SCHEMA } } },
  };
  try {
    console.log(`generated ${embedding}x${layers} model, ${tokens} tokens, ${rounds} rounds; warming up`);
    await stream(engine, bodies.unconstrained);
    const sample = await stream(engine, bodies.grammar);
    const runs = { unconstrained: [] as Run[], grammar: [] as Run[] };
    const loadBefore = os.loadavg()[0];
    for (let index = 0; index < rounds; index++) {
      const order = index % 2 === 0 ? (['unconstrained', 'grammar'] as const) : (['grammar', 'unconstrained'] as const);
      for (const side of order) {
        const run = await stream(engine, bodies[side]);
        if (run.tokens !== tokens) throw new Error(`${side} made ${run.tokens} tokens instead of ${tokens}`);
        runs[side].push(run);
      }
      console.log(`round ${index + 1}: unconstrained ${runs.unconstrained.at(-1)!.decodeTokensPerSecond} tok/s | grammar ${runs.grammar.at(-1)!.decodeTokensPerSecond} tok/s`);
    }
    const median = (list: readonly Run[], pick: (run: Run) => number) => round(percentile(list.map(pick).sort((a, b) => a - b), 0.5));
    const summary = {
      unconstrained: { decodeTokensPerSecond: median(runs.unconstrained, (run) => run.decodeTokensPerSecond), ttftMs: median(runs.unconstrained, (run) => run.ttftMs), cpuMicrosecondsPerToken: median(runs.unconstrained, (run) => run.cpuMicrosecondsPerToken) },
      grammar: { decodeTokensPerSecond: median(runs.grammar, (run) => run.decodeTokensPerSecond), ttftMs: median(runs.grammar, (run) => run.ttftMs), cpuMicrosecondsPerToken: median(runs.grammar, (run) => run.cpuMicrosecondsPerToken) },
    };
    // The machine is shared: a busy moment slows one side of one round. Each round's own ratio
    // (its two runs back to back) cancels most of that; their median is the headline.
    const roundRatios = runs.grammar.map((run, index) => run.decodeTokensPerSecond / runs.unconstrained[index].decodeTokensPerSecond);
    const ratio = round(percentile([...roundRatios].sort((a, b) => a - b), 0.5));
    const ratioOfMedians = round(summary.grammar.decodeTokensPerSecond / summary.unconstrained.decodeTokensPerSecond);
    const machine = describeMachine();
    const results = {
      machine, loadAverage1m: { before: round(loadBefore), after: round(os.loadavg()[0]) },
      options: { model: `generated llama, ${embedding}-dim, ${layers} layers, byte vocabulary`, tokens, rounds, threads: Number(values.threads), context: Number(values.context) },
      version: engine.version, summary, ratio, ratioOfMedians, roundRatios: roundRatios.map(round), grammarSample: sample.text.slice(0, 160), runs,
    };
    const markdown = [
      `# llama.cpp tokens/s under a JSON-schema grammar vs unconstrained, ${machine.gitSha}`, '',
      `Machine: ${machine.cpu}, ${machine.cores} cores (1-minute load ${results.loadAverage1m.before} before, ${results.loadAverage1m.after} after); Node ${machine.node}; ${engine.version}.`,
      `Model: ${results.options.model}; ${results.options.threads} thread(s); ${tokens} tokens per streamed chat completion, greedy; medians of ${rounds} interleaved rounds after a warm-up.`, '',
      '| answer | decode tokens/s | time to first token (ms) | CPU µs per token (whole request) |', '|---|---:|---:|---:|',
      `| unconstrained (EOS banned) | ${summary.unconstrained.decodeTokensPerSecond} | ${summary.unconstrained.ttftMs} | ${summary.unconstrained.cpuMicrosecondsPerToken} |`,
      `| response_format json_schema (grammar) | ${summary.grammar.decodeTokensPerSecond} | ${summary.grammar.ttftMs} | ${summary.grammar.cpuMicrosecondsPerToken} |`, '',
      `Ratio grammar / unconstrained, median of the rounds' own ratios: **${ratio}** (target ≥ 0.8: ${ratio >= 0.8 ? 'met' : 'NOT met'}); ` +
      `ratio of the medians above: ${ratioOfMedians}; per round: ${roundRatios.map((value) => round(value)).join(', ')}.`, '',
      `Start of a grammar answer: \`${results.grammarSample}\``, '',
    ].join('\n');
    saveResults(`llama-grammar-${new Date().toISOString().slice(0, 10)}-${machine.gitSha}-${embedding}x${layers}`, results, markdown);
  } finally {
    await engine.close();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** One streamed chat completion through the engine; token times are when each content chunk is handed on. */
async function stream(engine: LlamaCppEngine, body: Record<string, unknown>): Promise<Run & { text: string }> {
  const startedAt = performance.now();
  const cpuBefore = process.cpuUsage();
  let first = 0;
  let last = 0;
  let text = '';
  let usage = 0;
  await engine.run({
    jobId: 'bench', kind: 'JOB_KIND_CHAT_COMPLETION', body: Buffer.from(JSON.stringify(body)), stream: true, includeUsage: true, model: 'bench/grammar',
  } as never, {
    chunk: (data: Buffer) => {
      const now = performance.now();
      for (const event of data.toString().split('\n\n')) {
        if (!event.startsWith('data: {')) continue;
        const parsed = JSON.parse(event.slice(6));
        if (parsed.usage) usage = parsed.usage.completion_tokens;
        const piece = parsed.choices[0]?.delta?.content;
        if (!piece) continue;
        text += piece;
        if (first === 0) first = now;
        last = now;
      }
    },
    output: async () => undefined,
  } as never, new JobCancellation());
  const cpu = process.cpuUsage(cpuBefore);
  return { tokens: usage, cpuMicrosecondsPerToken: round((cpu.user + cpu.system) / Math.max(1, usage)), decodeTokensPerSecond: round(usage > 1 ? (usage - 1) / ((last - first) / 1000) : 0), ttftMs: round(first - startedAt), text };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
