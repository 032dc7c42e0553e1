/**
 * `node dist/bench/tracing-on-path.js`: what tracing every request costs the server's CPU, measured
 * in one process, finer than whole-server runs can on a shared 2-core VM (run-tracing.ts). Each
 * request does what a traced chat request does on the server: its HTTP server span
 * (startRequestSpan, the answer's `traceparent`, endRequestSpan), the pipeline's part of the
 * request under it (admitText → dispatch → a chunk → completed → close over in-memory fakes, as
 * tracing-off-path.ts; with tracing on that makes `admit`, `chat <model>` and `place`, and the
 * Assign's traceparent) run inside `Tracing.runIn`, and the batch span processor exports every span
 * over HTTP to a receiver in another process (otlp-sink.ts: its CPU is not counted). Modes, in
 * alternating rounds: `off` (no Tracing, the same request), `protobuf` and `json`
 * (OTEL_EXPORTER_OTLP_PROTOCOL). Reported: CPU µs per request of each (user + system of this
 * process, the garbage collection and the export included), and each traced mode minus `off`.
 * Flags: --requests 20000 --rounds 7 --rate 2000 (requests per second, in slices of 1 ms: the export
 * and the collector run between them as they would on a server)
 */
import { spawn } from 'node:child_process';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { readTracingSettings } from '../common/tracing/otel-settings';
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
type Mode = 'off' | 'protobuf' | 'json';

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
  const { values } = parseArgs({ options: { requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '7' }, rate: { type: 'string', default: '2000' } } });
  const sink = spawn(process.execPath, [path.join(__dirname, 'otlp-sink.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await new Promise<number>((resolve) => sink.stdout!.once('data', (line: Buffer) => resolve(Number(line.toString().trim()))));
    const tracingOf = (protocol: string) => Tracing.start(readTracingSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_TRACES_SAMPLER: 'always_on', OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
    }, 'bench')!, 'bench', { 'service.version': '1.0.0' });
    const tracings = { protobuf: tracingOf('http/protobuf'), json: tracingOf('http/json') };
    const modes: Record<Mode, (index: number) => Promise<void>> = { off: requestOf(null), protobuf: requestOf(tracings.protobuf), json: requestOf(tracings.json) };
    const requests = Number(values.requests);
    const rate = Number(values.rate);
    for (const request of Object.values(modes)) await cpuPerRequest(request, requests / 4, rate);
    const results: Record<Mode, number[]> = { off: [], protobuf: [], json: [] };
    const orders: Mode[][] = [['off', 'protobuf', 'json'], ['json', 'off', 'protobuf'], ['protobuf', 'json', 'off']];
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const mode of orders[round % orders.length]) {
        results[mode].push(await cpuPerRequest(modes[mode], requests, rate));
        // Each traced mode's spans are exported before the next mode runs: its export is its own cost.
        await tracings.protobuf.flush();
        await tracings.json.flush();
      }
    }
    const over = (mode: Mode) => results[mode].map((value, index) => value - results.off[index]);
    const stats = (await (await fetch(`http://127.0.0.1:${port}/stats`)).json()) as { exports: number; spans: number; bytes: number };
    console.log(JSON.stringify({
      microsPerRequest: { off: median(results.off), protobuf: median(results.protobuf), json: median(results.json) },
      tracingMicrosPerRequest: { protobuf: median(over('protobuf')), json: median(over('json')) },
      received: { ...stats, bytesPerSpan: Math.round(stats.bytes / stats.spans) },
      results,
    }, null, 1));
    await tracings.protobuf.shutdown();
    await tracings.json.shutdown();
  } finally {
    sink.kill('SIGTERM');
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
