import { Counter, type Metric, type Registry } from 'prom-client';
import type { FinishedRequest, RequestObserver, WorkOutcome } from '../pipeline/finished-request';
import { AccumulatedHistogram, type HistogramSeries } from './accumulated-histogram';

/**
 * Admission to settlement. Text requests run up to the 120 s budget (batch lines too); the
 * steps between 1 s and 30 s are where a chat answer's length shows.
 */
export const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120];
/** First token: tens of ms on an idle GPU, seconds behind a long prompt or a queue. */
export const TTFT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30];
/** Per output token: ~5–50 ms on GPUs, up to a second on the CPU engines of tests and small hosts. */
export const TPOT_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5];

const OUTCOMES: readonly WorkOutcome[] = ['succeeded', 'failed', 'canceled'];
/**
 * The `finish_reason` values: OpenAI's and vLLM's (`abort`, `error`), `none` when no job
 * completed (a failure), and `other` for anything else an engine may send: an engine's
 * string never becomes a label value of its own.
 */
export const FINISH_REASONS = ['stop', 'length', 'tool_calls', 'content_filter', 'function_call', 'abort', 'error', 'none', 'other'] as const;
/**
 * The `error` values: `none` when the request succeeded, the agent's `Failed.code` list for
 * text jobs (proto/PROTOCOL.md), `shared_pool_busy` (a relayed guest), `no_pod_available` (a
 * relayed job past the peer's cold-start bounds), the ticket's own
 * `failed`/`canceled`, and `other` for any code not listed.
 */
export const ERROR_CODES = [
  'none', 'engine_rejected', 'engine_error', 'engine_unavailable', 'canceled', 'deadline_exceeded', 'agent_draining', 'invalid_job',
  'pod_crash', 'shared_pool_busy', 'no_pod_available', 'failed', 'other',
] as const;

const REASON_INDEX = new Map<string, number>(FINISH_REASONS.map((reason, index) => [reason, index]));
const ERROR_INDEX = new Map<string, number>(ERROR_CODES.map((code, index) => [code, index]));
const NO_REASON = REASON_INDEX.get('none')!;
const OTHER_REASON = REASON_INDEX.get('other')!;
const NO_ERROR = ERROR_INDEX.get('none')!;
const OTHER_ERROR = ERROR_INDEX.get('other')!;
const CELLS_PER_OUTCOME = FINISH_REASONS.length * ERROR_CODES.length;

/** One deployment label and model: plain numbers the request path adds to, read at scrape. */
class DeploymentModelSeries {
  /** By `outcome × finish_reason × error` index: counting a request builds no string and hashes no label. */
  readonly finished = new Float64Array(OUTCOMES.length * CELLS_PER_OUTCOME);
  promptTokens = 0;
  completionTokens = 0;
  tokensRecorded = false;

  constructor(
    readonly deployment: string,
    readonly model: string,
    readonly latency: HistogramSeries,
    readonly timeToFirstToken: HistogramSeries,
    readonly timePerOutputToken: HistogramSeries,
  ) {}
}

/**
 * The per-deployment series of finished requests, fed by the pipeline's RequestObservers: end-
 * to-end latency, time to first token and per output token, requests by outcome, finish
 * reason and error, and tokens, each by `deployment` and `model`. `deployment` is the
 * deployment's id, or for a guest of shared serving the `shared/<model-id>` it called (never
 * the owner's deployment: a guest's traffic is not the owner's to see, nor the owner's the
 * guest's); `model` is the catalog model id. Both are resolved ids, and every other label comes
 * from a closed set: no request field becomes a label value as sent.
 */
export class RequestMetrics implements RequestObserver {
  /** deployment label → model → series: two lookups of strings the request already holds. */
  private readonly byDeployment = new Map<string, Map<string, DeploymentModelSeries>>();
  private readonly latency = new AccumulatedHistogram('inference_request_e2e_latency_seconds',
    'Text requests (not batch lines) from admission to settlement (the engine\'s last event), every outcome, by deployment and model.', ['deployment', 'model'], LATENCY_BUCKETS);
  private readonly timeToFirstToken = new AccumulatedHistogram('inference_request_time_to_first_token_seconds',
    'Streams: admission to the first chunk of output, by deployment and model.', ['deployment', 'model'], TTFT_BUCKETS);
  private readonly timePerOutputToken = new AccumulatedHistogram('inference_request_time_per_output_token_seconds',
    'Succeeded streams of 2 or more completion tokens: (latency - time to first token) / (completion tokens - 1), by deployment and model.',
    ['deployment', 'model'], TPOT_BUCKETS);

  constructor(registry: Registry) {
    const registers = [registry];
    // Not prom-client classes, but the collector shape its Registry reads (name, get, reset).
    for (const histogram of [this.latency, this.timeToFirstToken, this.timePerOutputToken]) registry.registerMetric(histogram as unknown as Metric);
    const finished: Counter<'deployment' | 'model' | 'outcome' | 'finish_reason' | 'error'> = new Counter({
      name: 'inference_requests_finished_total',
      help: 'Text requests settled, by deployment, model, outcome (succeeded, failed, canceled), finish_reason and error code.',
      labelNames: ['deployment', 'model', 'outcome', 'finish_reason', 'error'], registers,
      collect: () => {
        finished.reset();
        for (const series of this.allSeries()) {
          const { deployment, model } = series;
          series.finished.forEach((count, index) => {
            if (count === 0) return;
            const outcome = OUTCOMES[Math.floor(index / CELLS_PER_OUTCOME)];
            const cell = index % CELLS_PER_OUTCOME;
            finished.inc({ deployment, model, outcome, finish_reason: FINISH_REASONS[Math.floor(cell / ERROR_CODES.length)], error: ERROR_CODES[cell % ERROR_CODES.length] }, count);
          });
        }
      },
    });
    const tokens: Counter<'deployment' | 'model' | 'kind'> = new Counter({
      name: 'inference_tokens_total', help: 'Tokens metered on text requests, by deployment, model and kind (prompt, completion).',
      labelNames: ['deployment', 'model', 'kind'], registers,
      collect: () => {
        tokens.reset();
        for (const series of this.allSeries()) {
          if (!series.tokensRecorded) continue;
          tokens.inc({ deployment: series.deployment, model: series.model, kind: 'prompt' }, series.promptTokens);
          tokens.inc({ deployment: series.deployment, model: series.model, kind: 'completion' }, series.completionTokens);
        }
      },
    });
  }

  /** On the request path, once per settled request: a few additions to numbers, no allocation once a series exists. */
  requestFinished(request: FinishedRequest): void {
    const series = this.series(request.sharedModel ?? request.deploymentId, request.model);
    const { latencyMs, ttftMs, completionTokens } = request;
    // A batch line waits for capacity live traffic leaves free, by design: its time is not a latency anyone waits on.
    if (latencyMs >= 0 && request.batchId === undefined) series.latency.observe(latencyMs / 1000);
    if (request.stream && ttftMs !== null && ttftMs >= 0) {
      series.timeToFirstToken.observe(ttftMs / 1000);
      // One token has no gap after the first; a failed or canceled stream's end is not its last token's time.
      if (request.outcome === 'succeeded' && completionTokens >= 2 && latencyMs >= ttftMs) {
        series.timePerOutputToken.observe((latencyMs - ttftMs) / 1000 / (completionTokens - 1));
      }
    }
    const reason = request.finishReason === null ? NO_REASON : REASON_INDEX.get(request.finishReason) ?? OTHER_REASON;
    const error = request.errorCode === null ? NO_ERROR : ERROR_INDEX.get(request.errorCode) ?? OTHER_ERROR;
    const outcome = request.outcome === 'succeeded' ? 0 : request.outcome === 'failed' ? 1 : 2;
    series.finished[outcome * CELLS_PER_OUTCOME + reason * ERROR_CODES.length + error]++;
    if (request.promptTokens + completionTokens > 0) {
      series.tokensRecorded = true;
      if (request.promptTokens > 0) series.promptTokens += request.promptTokens;
      if (completionTokens > 0) series.completionTokens += completionTokens;
    }
  }

  private series(deployment: string, model: string): DeploymentModelSeries {
    let byModel = this.byDeployment.get(deployment);
    if (!byModel) this.byDeployment.set(deployment, (byModel = new Map()));
    let series = byModel.get(model);
    if (!series) {
      series = new DeploymentModelSeries(deployment, model, this.latency.series(deployment, model),
        this.timeToFirstToken.series(deployment, model), this.timePerOutputToken.series(deployment, model));
      byModel.set(model, series);
    }
    return series;
  }

  private *allSeries(): Iterable<DeploymentModelSeries> {
    for (const byModel of this.byDeployment.values()) yield* byModel.values();
  }
}
