/**
 * `npm run bench:request-metrics`: what recording one finished text request costs on the
 * request path (issue 37 item 2), in nanoseconds per request, in this process:
 * - `Metrics.requestFinished`: the per-deployment Prometheus series (latency, time to first
 *   token, time per output token, the finished counter, tokens), what every server pays;
 * - `Metrics.recordRequest`: the route series every HTTP request already paid, as a yardstick;
 * - `GenAiMetrics.requestFinished`: the OpenTelemetry GenAI instruments, paid only with
 *   OTEL_METRICS_EXPORTER=otlp, and the same records through the SDK's own histograms (which
 *   hash each record's attributes), the way it does not record them;
 * - a scrape of /metrics' text with that many series (paid per scrape, not per request).
 * A mix of 20 deployments and 2 shared models, 70 % streams, 5 % failed, 2 % canceled. Each
 * figure is the median of --rounds rounds of --iterations requests (and the best round), after
 * a warm-up round.
 * Flags: --iterations 200000 --rounds 9
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Attributes } from '@opentelemetry/api';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import type { FinishedRequest } from '../control-plane/pipeline/finished-request';
import { Metrics } from '../control-plane/telemetry/metrics';
import { GenAiMetrics } from '../control-plane/telemetry/otel-metrics';
import { describeMachine, sourceState } from './machine';
import { saveResults } from './report';

/** Collects only when asked (never here): the SDK's recording cost without an export in the measurement. */
class IdleReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const ROUTES = ['chat.completions', 'completions', 'responses', 'embeddings', 'other'];

function requestMix(count: number): FinishedRequest[] {
  const requests: FinishedRequest[] = [];
  for (let index = 0; index < count; index++) {
    const guest = index % 11 === 10;
    const deployment = `dep_${(index % 20).toString(16).padStart(24, '0')}`;
    const model = guest ? `org/shared-model-${index % 2}` : `org/model-${index % 20}`;
    const stream = index % 10 < 7;
    const outcome = index % 50 === 0 ? 'canceled' : index % 20 === 1 ? 'failed' : 'succeeded';
    requests.push({
      workspaceId: 'ws_bench', apiKeyId: 'key_bench', deploymentId: deployment, sharedModel: guest ? `shared/${model}` : null, model,
      endpoint: index % 4 === 3 ? 'completions' : 'chat.completions', stream, batchId: undefined, outcome,
      finishReason: outcome === 'failed' ? null : ['stop', 'stop', 'length', 'tool_calls'][index % 4], errorCode: outcome === 'succeeded' ? null : outcome === 'failed' ? 'engine_error' : 'canceled',
      promptTokens: 40 + (index % 300), completionTokens: outcome === 'failed' ? 0 : 1 + (index % 200), cachedTokens: 0,
      startedAt: 1_000, latencyMs: 50 + (index % 4_000), ttftMs: stream ? 5 + (index % 300) : null,
      replicaId: 'rep_bench', requestId: `req_${index}`, traceId: null, phases: null,
    });
  }
  return requests;
}

/** Nanoseconds per call of `record` over `requests`, per round. */
function measure(requests: readonly FinishedRequest[], iterations: number, rounds: number, record: (request: FinishedRequest) => void): number[] {
  const perRound: number[] = [];
  for (let round = -1; round < rounds; round++) {
    const startedAt = process.hrtime.bigint();
    for (let iteration = 0; iteration < iterations; iteration++) record(requests[iteration % requests.length]);
    const nanoseconds = Number(process.hrtime.bigint() - startedAt) / iterations;
    if (round >= 0) perRound.push(nanoseconds);
  }
  return perRound;
}

/**
 * What GenAiMetrics would cost recording through `Histogram.record` of an SDK meter, with the
 * attribute objects cached as it caches them: the SDK hashes the attributes of every record.
 */
function sdkHistograms(): (request: FinishedRequest) => void {
  const meter = new MeterProvider({ readers: [new IdleReader()] }).getMeter('bench');
  const [duration, firstToken, perToken, tokens] = ['duration', 'ttft', 'tpot', 'tokens'].map((name) => meter.createHistogram(name));
  const attributes = new Map<string, { request: Attributes; input: Attributes; output: Attributes; failed: Attributes }>();
  return (request) => {
    const key = request.sharedModel ?? request.deploymentId;
    let set = attributes.get(key);
    if (!set) {
      const base = { 'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'inference-platform', 'gen_ai.request.model': request.model, 'inference.deployment': key };
      set = { request: base, input: { ...base, 'gen_ai.token.type': 'input' }, output: { ...base, 'gen_ai.token.type': 'output' }, failed: { ...base, 'error.type': 'engine_error' } };
      attributes.set(key, set);
    }
    const succeeded = request.outcome === 'succeeded';
    duration.record(request.latencyMs / 1000, succeeded ? set.request : set.failed);
    if (succeeded && request.ttftMs !== null) {
      firstToken.record(request.ttftMs / 1000, set.request);
      if (request.completionTokens >= 2) perToken.record((request.latencyMs - request.ttftMs) / 1000 / (request.completionTokens - 1), set.request);
    }
    if (request.promptTokens + request.completionTokens > 0) {
      tokens.record(request.promptTokens, set.input);
      tokens.record(request.completionTokens, set.output);
    }
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const round1 = (value: number) => Math.round(value * 10) / 10;

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { iterations: { type: 'string', default: '200000' }, rounds: { type: 'string', default: '9' } } });
  const iterations = Number(values.iterations);
  const rounds = Number(values.rounds);
  const requests = requestMix(1_100);
  const loadBefore = os.loadavg()[0];

  const metrics = new Metrics({ routes: ROUTES });
  const genAi = new GenAiMetrics('inference-platform');
  const provider = new MeterProvider({ readers: [new IdleReader({ metricProducers: [genAi] })] });
  const rows = [
    { what: 'Metrics.requestFinished (per-deployment Prometheus series)', perRound: measure(requests, iterations, rounds, (request) => metrics.requestFinished(request)) },
    {
      what: 'Metrics.recordRequest (the route series, before this change too)',
      perRound: measure(requests, iterations, rounds, (request) => metrics.recordRequest(request.deploymentId, request.endpoint, 200, request.latencyMs / 1000)),
    },
    { what: 'GenAiMetrics.requestFinished (OpenTelemetry, only when on)', perRound: measure(requests, iterations, rounds, (request) => genAi.requestFinished(request)) },
    { what: 'the same records through the SDK\'s own histograms (not used; for comparison)', perRound: measure(requests, iterations, rounds, sdkHistograms()) },
  ].map((row) => ({ ...row, medianNs: round1(median(row.perRound)), bestNs: round1(Math.min(...row.perRound)) }));

  const scrapes: number[] = [];
  let bytes = 0;
  for (let index = 0; index < 21; index++) {
    const startedAt = process.hrtime.bigint();
    bytes = (await metrics.render()).body.length;
    if (index > 0) scrapes.push(Number(process.hrtime.bigint() - startedAt) / 1e6);
  }
  metrics.close();
  await provider.shutdown();

  const machine = describeMachine();
  const results = {
    machine, source: sourceState(), loadAverage1m: { before: round1(loadBefore), after: round1(os.loadavg()[0]) },
    options: { iterations, rounds, deployments: 20, sharedModels: 2, distinctRequests: requests.length },
    rows: rows.map(({ what, medianNs, bestNs, perRound }) => ({ what, medianNs, bestNs, perRound: perRound.map(round1) })),
    scrape: { medianMs: round1(median(scrapes)), bytes },
  };
  const markdown = [
    `# Recording a finished request: ns per request, ${machine.gitSha}`, '',
    `Machine: ${machine.cpu}, ${machine.cores} cores (1-minute load ${results.loadAverage1m.before} before, ${results.loadAverage1m.after} after); Node ${machine.node}.`,
    `${iterations} requests per round over ${requests.length} distinct ones (20 deployments, 2 shared models, 70 % streams, 5 % failed, 2 % canceled); median and best of ${rounds} rounds after a warm-up.`, '',
    '| recording | median ns/request | best ns/request |', '|---|---:|---:|',
    ...rows.map((row) => `| ${row.what} | ${row.medianNs} | ${row.bestNs} |`), '',
    `A scrape of /metrics' text with these series: ${results.scrape.medianMs} ms, ${Math.round(bytes / 1024)} KiB (median of 20; per scrape, not per request).`, '',
    'The gateway spends ~150 µs of CPU per chat request (docs/performance.md): the Prometheus observer is its per-request share here.', '',
  ].join('\n');
  saveResults(`request-metrics-${new Date().toISOString().slice(0, 10)}-${machine.gitSha}`, results, markdown);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
