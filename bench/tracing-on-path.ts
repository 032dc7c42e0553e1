/**
 * `node dist/bench/tracing-on-path.js`: what tracing every request costs the server's CPU, measured
 * in one process, finer than whole-server runs can on a shared 2-core VM (run-tracing.ts). Each
 * request does what a traced chat request does on the server: its HTTP server span
 * (startRequestSpan, the answer's `traceparent`, endRequestSpan), the pipeline's part of the
 * request under it (admitText → dispatch → a chunk → completed → close over in-memory fakes, as
 * tracing-off-path.ts; with tracing on that makes `admit`, `chat <model>` and `place`, and the
 * Assign's traceparent) run inside `Tracing.runIn`, and a batch span processor exports every span
 * over HTTP to a receiver in another process (otlp-sink.ts: its CPU is not counted). Modes, in
 * rotating rounds: `off` (no Tracing, the same request), `protobuf` (ours: OtlpSpanProcessor, the
 * default of http/protobuf), `sdk-protobuf` (the SDK's BatchSpanProcessor and protobuf exporter,
 * what http/protobuf used before) and `json` (OTEL_EXPORTER_OTLP_PROTOCOL=http/json); and two ablations,
 * `spans-only` (spans made and ended, not kept) and `protobuf-no-http` (ours without the POST). Reported: CPU
 * µs per request of each (user + system of this process, the garbage collection and the export
 * included), and each traced mode minus `off` (median of the per-round differences).
 * Flags: --requests 20000 --rounds 7 --rate 2000 (requests per second, in slices of 1 ms: the export
 * and the collector run between them as they would on a server) --modes off,protobuf,sdk-protobuf,json
 */
import { spawn } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { OTLPTraceExporter as SdkProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace';
import { readTracingSettings, type TracingSettings } from '../common/tracing/otel-settings';
import { OtlpSpanProcessor } from '../common/tracing/otlp-span-processor';
import { Tracing } from '../common/tracing/tracing';
import { InferencePipeline } from '../control-plane/pipeline/inference-pipeline';
import { endRequestSpan, startRequestSpan, traceparentHeader, workTraceOf } from '../gateway/http/request-span';
import { median } from './report';

const MODEL = 'acme/chat-8b';
const KEY = { id: 'key_1', workspaceId: 'ws_owner', rpmLimit: 60, tpdLimit: 1_000_000, creditExhausted: false };
const DEPLOYMENT = { id: 'dep_owner', slug: 'owned', workspaceId: 'ws_owner', modelId: MODEL, status: 'Running', sharing: 'not_shared', routingPolicy: 'least-loaded' };
const CHUNK = Buffer.from('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n');
const USAGE = { promptTokens: 12, completionTokens: 30, totalTokens: 42 };
const HTTP_REQUEST = { method: 'POST', url: '/d/owned/v1/chat/completions', headers: {} } as unknown as IncomingMessage;

interface Listener { onChunk(data: Buffer): void; onCompleted(usage: unknown, reason: string): void; onFailed(): void; onOutput(): void }

/** One traced (or untraced) request's server-side work, as described above. */
function requestOf(tracing: Tracing | null): (index: number) => Promise<void> {
  const hold = { apiKeyId: 'key_1', day: 20_000, tokens: 100, shared: false };
  const decision = { remainingRequests: 59, resetRequestsSeconds: 60, remainingTokens: 900, resetTokensSeconds: 3_600, hold };
  let sent: Listener | null = null;
  const job = { id: 'job_1', replicaId: 'rep_1', routingReason: 'least_loaded', carrier: { replicaId: 'rep_1' }, finished: false, canceled: false, cancel() {}, consumed() {} };
  const model = { id: MODEL, modality: 'text', task: 'chat', engine: 'vllm', official: true, inputModalities: ['text'] };
  const pipeline = new InferencePipeline({
    catalog: { find: () => model },
    rateLimiter: { admit: async () => decision, settle() {}, refusalNow: () => null },
    // The Assign's traceparent is read here, as the dispatcher puts it on the wire.
    jobs: { dispatch: (_request: unknown, listener: Listener) => { sent = listener; return job; } },
    usage: { record() {} },
    metrics: { recordTokens() {}, recordTimeToFirstToken() {} },
    observer: { requestFinished() {} },
    cacheSalts: { of: () => 'salt' },
    tracing,
  } as unknown as ConstructorParameters<typeof InferencePipeline>[0]);
  const body = Buffer.from('{"messages":[{"role":"user","content":"hi"}],"max_tokens":50}');
  const listener: Listener = { onChunk() {}, onCompleted() {}, onFailed() {}, onOutput() {} };
  const serve = async (requestId: string, span: ReturnType<typeof startRequestSpan> | null) => {
    const work = {
      endpoint: 'chat.completions', body, fields: { max_tokens: 50 }, model: undefined, stream: true, includeUsage: true, deadlineUnixMs: 9e12,
      streamWindowBytes: 65_536, servedBy: () => 'chat', trace: workTraceOf(requestId, span),
    };
    const ticket = await pipeline.admitText(KEY as never, DEPLOYMENT as never, work as never);
    ticket.dispatch(listener as never);
    sent!.onChunk(CHUNK);
    sent!.onCompleted(USAGE, 'stop');
    ticket.close();
  };
  return async (index) => {
    const requestId = `req_${index}`;
    if (!tracing) {
      await serve(requestId, null);
      return;
    }
    const span = startRequestSpan(tracing, HTTP_REQUEST, 'chat.completions', requestId);
    traceparentHeader(span);
    await tracing.runIn(span, serve, requestId, span);
    endRequestSpan(span, 200, DEPLOYMENT.id);
  };
}

/** CPU µs per request over `requests`, paced at `rate` per second in 1 ms slices. */
async function cpuPerRequest(request: (index: number) => Promise<void>, requests: number, rate: number): Promise<number> {
  const perSlice = Math.max(1, Math.round(rate / 1_000));
  const before = process.cpuUsage();
  for (let index = 0; index < requests;) {
    const sliceEnd = Math.min(requests, index + perSlice);
    for (; index < sliceEnd; index++) await request(index);
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  const spent = process.cpuUsage(before);
  return (spent.user + spent.system) / requests;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '7' }, rate: { type: 'string', default: '2000' },
      modes: { type: 'string', default: 'off,protobuf,sdk-protobuf,json' },
    },
  });
  const sink = spawn(process.execPath, [path.join(__dirname, 'otlp-sink.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve) => sink.stdout!.once('data', (line: Buffer) => resolve(Number(line.toString().trim()))));
    const settingsOf = (protocol: string): TracingSettings => readTracingSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'always_on', OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    }, 'bench')!;
    const sdkSettings = settingsOf('http/protobuf');
    const sdkProcessor = new BatchSpanProcessor({
      exporter: new SdkProtobufExporter({ url: sdkSettings.endpoint, timeoutMillis: sdkSettings.exportTimeoutMs }),
      scheduledDelayMillis: sdkSettings.batch.scheduleDelayMs, maxQueueSize: sdkSettings.batch.maxQueueSize,
      maxExportBatchSize: sdkSettings.batch.maxExportBatchSize, exportTimeoutMillis: sdkSettings.batch.exportTimeoutMs,
    });
    const tracings: Record<string, Tracing> = {
      protobuf: Tracing.start(settingsOf('http/protobuf'), 'bench', { 'service.version': '1.0.0' }),
      'sdk-protobuf': Tracing.start(sdkSettings, 'bench', { 'service.version': '1.0.0' }, sdkProcessor),
      json: Tracing.start(settingsOf('http/json'), 'bench', { 'service.version': '1.0.0' }),
      // Ablations, to split the cost: spans made and ended but not kept; ours encoded and batched but not sent.
      'spans-only': Tracing.start(sdkSettings, 'bench', {}, { onStart() {}, onEnd() {}, forceFlush: async () => {}, shutdown: async () => {} }),
      'protobuf-no-http': Tracing.start(sdkSettings, 'bench', { 'service.version': '1.0.0' }, new OtlpSpanProcessor({ send: async () => true, close() {} }, sdkSettings.batch)),
    };
    const modes = values.modes.split(',');
    const unknown = modes.filter((mode) => mode !== 'off' && !tracings[mode]);
    if (unknown.length > 0 || !modes.includes('off')) throw new Error(`--modes: off and some of ${Object.keys(tracings).join(', ')}`);
    const requestOfMode = Object.fromEntries(modes.map((mode) => [mode, requestOf(mode === 'off' ? null : tracings[mode])]));
    const requests = Number(values.requests);
    const rate = Number(values.rate);
    for (const mode of modes) await cpuPerRequest(requestOfMode[mode], requests / 4, rate);
    const results: Record<string, number[]> = Object.fromEntries(modes.map((mode) => [mode, []]));
    for (let round = 0; round < Number(values.rounds); round++) {
      // Each round starts with the next mode, so no mode always runs right after another's collection.
      for (let step = 0; step < modes.length; step++) {
        const mode = modes[(round + step) % modes.length];
        results[mode].push(await cpuPerRequest(requestOfMode[mode], requests, rate));
        // Each traced mode's spans are exported before the next mode runs: its export is its own cost.
        for (const tracing of Object.values(tracings)) await tracing.flush();
      }
    }
    const over = (mode: string) => results[mode].map((value, index) => value - results.off[index]);
    const stats = (await (await fetch(`http://127.0.0.1:${port}/stats`)).json()) as { exports: number; spans: number; bytes: number };
    console.log(JSON.stringify({
      microsPerRequest: Object.fromEntries(modes.map((mode) => [mode, median(results[mode])])),
      tracingMicrosPerRequest: Object.fromEntries(modes.filter((mode) => mode !== 'off').map((mode) => [mode, median(over(mode))])),
      received: { ...stats, bytesPerSpan: Math.round(stats.bytes / stats.spans) },
      results,
    }, null, 1));
    for (const tracing of Object.values(tracings)) await tracing.shutdown();
  } finally {
    sink.kill('SIGTERM');
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
