/**
 * `npm run bench:embeddings`: what `/v1/embeddings` through the platform costs over calling
 * the engine directly, for batches of 1, 32 and 256 inputs, on two engines:
 * - `openai`: the pass-through adapter in front of an HTTP engine (the CPU engine's HTTP
 *   server, as a stand-in for vLLM/TEI: it answers in microseconds, so what is measured is the
 *   platform's own cost). Direct = the same HTTP call to that engine. Float, then base64.
 * - `llama`: llama.cpp on a generated GGUF model. Direct = node-llama-cpp's embedding context in
 *   this process, one input after another, as the agent runs them.
 * The platform is a server process (client → gateway → gRPC → agent process → engine); a batch
 * over the model's engine batch (64) is split into jobs and reassembled. Requests run one at a
 * time, direct and platform interleaved. Reports embeddings/s and p50/p99 latency per side and
 * the overhead per request and per input.
 * Flags: --engines openai,llama --requests 60 (per batch size and side; 256-input batches use a
 *        quarter) --threads 1 --database-url URL (default: embedded PostgreSQL)
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startCpuEngineServer, type CpuEngineServer } from '../worker-agent/engines/cpu-engine-server';
import { writeTinyGguf } from '../worker-agent/llama/tiny-gguf';
import { describeMachine } from './machine';
import { saveResults } from './report';
import { percentile } from './paced-client';
import { ServerProcess, until } from './server-process';

const BATCH_SIZES = [1, 32, 256] as const;
const OPENAI_MODEL = 'BAAI/bge-large-en-v1.5';
const LLAMA_MODEL = 'local/bench-embed';
const OPERATOR_TOKEN = `bench-operator-${Math.random().toString(36).slice(2)}`;

type Embed = (inputs: string[]) => Promise<number>;

interface Side { p50Ms: number; p99Ms: number; embeddingsPerSecond: number }
interface Row { engine: string; batch: number; requests: number; direct: Side; platform: Side; overheadPerRequestMs: number; overheadPerInputMs: number }

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      engines: { type: 'string', default: 'openai,llama' }, requests: { type: 'string', default: '60' },
      threads: { type: 'string', default: '1' }, 'database-url': { type: 'string' },
    },
  });
  const engines = values.engines.split(',');
  const requests = Number(values.requests);
  const threads = Number(values.threads);
  const rows: Row[] = [];
  if (engines.includes('openai')) rows.push(...await benchOpenAi(requests, values['database-url']));
  if (engines.includes('llama')) rows.push(...await benchLlama(requests, threads, values['database-url']));
  write({ machine: describeMachine(), loadAverage1m: round(os.loadavg()[0]), options: { requests, threads, batchSizes: BATCH_SIZES }, rows });
}

async function benchOpenAi(requests: number, databaseUrl: string | undefined): Promise<Row[]> {
  const engine: CpuEngineServer = await startCpuEngineServer({ embedding: { dimensions: 1024, maxInputTokens: 512 } });
  const server = await ServerProcess.start({ name: 'bench-embeddings', databaseUrl, env: { LOCAL_ENGINE: 'openai', LOCAL_ENGINE_URL: engine.url, LOCAL_AGENT_NODE_ARGS: process.env.BENCH_AGENT_NODE_ARGS ?? '' } });
  try {
    const url = await deploy(server, OPENAI_MODEL);
    const rows: Row[] = [];
    // Float, then base64: what the openai SDKs ask for when the caller does not say (a quarter of the bytes).
    for (const encoding of ['float', 'base64'] as const) {
      const direct: Embed = (inputs) => post(`${engine.url}/v1/embeddings`, { model: OPENAI_MODEL, input: inputs, encoding_format: encoding }, undefined);
      const platform: Embed = (inputs) => post(url, { input: inputs, encoding_format: encoding }, server.key);
      rows.push(...await compare(`openai (mock engine), ${encoding}`, direct, platform, requests));
    }
    return rows;
  } finally {
    await server.stop();
    await engine.close();
  }
}

async function benchLlama(requests: number, threads: number, databaseUrl: string | undefined): Promise<Row[]> {
  const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-embeddings-'));
  fs.chmodSync(workDir, 0o755);
  const modelPath = writeTinyGguf(path.join(workDir, 'embed.gguf'), { contextLength: 512, variant: 'embedding' });
  const library = await import('node-llama-cpp');
  const llama = await library.getLlama({ gpu: false, build: 'never', maxThreads: threads, logLevel: library.LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
  const context = await model.createEmbeddingContext({ contextSize: 512, threads });
  const server = await ServerProcess.start({ name: 'bench-embeddings-llama', databaseUrl, env: { OPERATOR_TOKEN, LOCAL_LLAMA_THREADS: String(threads), LOCAL_LLAMA_CONTEXT_SIZE: '512', LOCAL_LLAMA_PARALLEL: '1' } });
  try {
    await graphql(server.baseUrl, OPERATOR_TOKEN, 'mutation($spec: JSONObject!) { registerCatalogModel(spec: $spec) { id } }', {
      spec: {
        id: LLAMA_MODEL, name: 'bench embedding model', modality: 'text', task: 'embedding', engine: 'llama-cpp', official: false, gpuMemoryGb: 0.1,
        inputModalities: ['text'], sizes: [], targetConcurrency: 1, source: { kind: 'gguf', path: modelPath },
        embedding: { dimensions: model.embeddingVectorSize, maxInputTokens: 256, maxBatchInputs: 64 },
      },
    });
    const url = await deploy(server, LLAMA_MODEL);
    const platform: Embed = (inputs) => post(url, { input: inputs, encoding_format: 'float' }, server.key);
    const direct: Embed = async (inputs) => {
      const startedAt = performance.now();
      for (const input of inputs) await context.getEmbeddingFor(input);
      return performance.now() - startedAt;
    };
    return await compare(`llama.cpp (generated ${model.embeddingVectorSize}-dim model, ${threads} thread)`, direct, platform, requests);
  } finally {
    await server.stop();
    await context.dispose();
    await model.dispose();
    fs.rmSync(workDir, { recursive: true, force: true });
  }
}

/** An embedding deployment of `modelId` on the server, once its replica answers: its embeddings URL. */
async function deploy(server: ServerProcess, modelId: string): Promise<string> {
  const created = await server.graphql(`mutation { createDeployment(input: {modelId: "${modelId}", priceCapPerHour: 2, minReplicas: 1, maxReplicas: 1}) { deployment { slug } } }`);
  const url = `${server.baseUrl}/d/${created.createDeployment.deployment.slug}/v1/embeddings`;
  await until(async () => (await post(url, { input: ['warm'] }, server.key).then(() => true, () => false)), 120_000, `the ${modelId} replica`, 250);
  return url;
}

async function compare(engine: string, direct: Embed, platform: Embed, requests: number): Promise<Row[]> {
  const rows: Row[] = [];
  for (const batch of BATCH_SIZES) {
    const count = batch >= 256 ? Math.max(4, Math.ceil(requests / 4)) : requests;
    const times = { direct: [] as number[], platform: [] as number[] };
    for (let warm = 0; warm < 3; warm++) await direct(inputsOf(batch, -1 - warm)).then(() => platform(inputsOf(batch, -1 - warm)));
    for (let request = 0; request < count; request++) {
      // Alternate the order so neither side always runs on a freshly idle machine.
      const order = request % 2 === 0 ? (['direct', 'platform'] as const) : (['platform', 'direct'] as const);
      for (const side of order) times[side].push(await (side === 'direct' ? direct : platform)(inputsOf(batch, request)));
    }
    const direct50 = summarise(times.direct, batch);
    const platform50 = summarise(times.platform, batch);
    const overhead = round(platform50.p50Ms - direct50.p50Ms);
    rows.push({ engine, batch, requests: count, direct: direct50, platform: platform50, overheadPerRequestMs: overhead, overheadPerInputMs: round(overhead / batch) });
    console.log(`${engine}, batch ${batch}: direct p50 ${direct50.p50Ms} ms | platform p50 ${platform50.p50Ms} ms`);
  }
  return rows;
}

/** Distinct inputs per request, ~12 words each (a passage-sized chunk is longer; the engine cost is not the point). */
function inputsOf(batch: number, request: number): string[] {
  return Array.from({ length: batch }, (_, index) => `request ${request} passage ${index}: the platform embeds every input of the batch in order`);
}

async function post(url: string, body: unknown, key: string | undefined): Promise<number> {
  const startedAt = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) }, body: JSON.stringify(body) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`${url} answered ${response.status}: ${text.slice(0, 300)}`);
  return performance.now() - startedAt;
}

async function graphql(baseUrl: string, token: string, query: string, variables: Record<string, unknown>): Promise<any> {
  const response = await fetch(`${baseUrl}/graphql`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  const body = (await response.json()) as { data?: unknown; errors?: unknown };
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

function summarise(times: number[], batch: number): Side {
  const sorted = [...times].sort((left, right) => left - right);
  const total = times.reduce((sum, time) => sum + time, 0);
  return { p50Ms: round(percentile(sorted, 0.5)), p99Ms: round(percentile(sorted, 0.99)), embeddingsPerSecond: round((batch * times.length) / (total / 1000)) };
}

function round(value: number): number {
  return Math.round(value * 100) / 100;
}

function write(results: { machine: Record<string, string | number>; loadAverage1m: number; options: unknown; rows: Row[] }): void {
  const name = `embeddings-${new Date().toISOString().slice(0, 10)}-${results.machine.gitSha}`;
  const markdown = [
    `# Embeddings through the platform vs the engine directly (${name})`,
    '',
    `Machine: ${results.machine.cpu ?? ''} ${results.machine.cores ?? ''} cores; load average (1 min) at the end ${results.loadAverage1m}. One request at a time.`,
    '',
    '| engine | batch | requests | direct p50 / p99 ms | platform p50 / p99 ms | direct emb/s | platform emb/s | overhead per request (p50) | per input |',
    '|---|---|---|---|---|---|---|---|---|',
    ...results.rows.map((row) => `| ${row.engine} | ${row.batch} | ${row.requests} | ${row.direct.p50Ms} / ${row.direct.p99Ms} | ${row.platform.p50Ms} / ${row.platform.p99Ms} | ${row.direct.embeddingsPerSecond} | ${row.platform.embeddingsPerSecond} | ${row.overheadPerRequestMs} ms | ${row.overheadPerInputMs} ms |`),
    '',
  ].join('\n');
  saveResults(name, results, markdown);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
