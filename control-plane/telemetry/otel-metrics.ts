import type { Attributes, Histogram, Meter } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { AggregationTemporalityPreference, OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  type AggregationTemporality, type InstrumentType, MeterProvider, PeriodicExportingMetricReader, type PushMetricExporter, type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import type { Logger } from 'pino';
import type { FinishedRequest, RequestObserver } from '../pipeline/finished-request';
import type { OtelMetricsConfig } from './otel-metrics-config';
import { ERROR_CODES } from './request-metrics';

/*
 * The OpenTelemetry GenAI semantic conventions' metric and attribute names, spelled here: the
 * constants of @opentelemetry/semantic-conventions for them are incubating and deprecated
 * there (moved to the GenAI conventions' own repository), and these strings are the contract.
 */
const TIME_TO_FIRST_TOKEN = 'gen_ai.server.time_to_first_token';
const TIME_PER_OUTPUT_TOKEN = 'gen_ai.server.time_per_output_token';
const REQUEST_DURATION = 'gen_ai.server.request.duration';
const TOKEN_USAGE = 'gen_ai.client.token.usage';
const OPERATION_NAME = 'gen_ai.operation.name';
const PROVIDER_NAME = 'gen_ai.provider.name';
const REQUEST_MODEL = 'gen_ai.request.model';
const TOKEN_TYPE = 'gen_ai.token.type';
const ERROR_TYPE = 'error.type';
/** Ours: the `deployment` label of /metrics (a deployment id, or a guest's `shared/<model-id>`). */
const DEPLOYMENT = 'inference.deployment';

/** The conventions' advised bucket boundaries for each histogram. */
const DURATION_BOUNDARIES = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
const TTFT_BOUNDARIES = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10];
const TPOT_BOUNDARIES = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5];
const TOKEN_BOUNDARIES = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

/** Our endpoints as `gen_ai.operation.name` values (a Responses turn is a chat on the engine). */
const OPERATIONS: Readonly<Record<string, string>> = {
  'chat.completions': 'chat', responses: 'chat', completions: 'text_completion', embeddings: 'embeddings',
};
const OTHER = '_OTHER';
const KNOWN_ERRORS = new Set<string>(ERROR_CODES.filter((code) => code !== 'none' && code !== 'other'));

/** The attribute sets of one deployment label, model and operation, built once and reused (the SDK hashes them on every record). */
interface AttributeSets {
  readonly request: Attributes;
  readonly input: Attributes;
  readonly output: Attributes;
  /** By error code (the failed and canceled requests' `error.type`). */
  readonly failed: Map<string, Attributes>;
}

/**
 * The GenAI metrics of every settled text request, recorded through an OpenTelemetry Meter:
 * - `gen_ai.server.request.duration` (s): admission to settlement, every outcome; `error.type`
 *   on a failed or canceled request (its code, from a closed set, else `_OTHER`);
 * - `gen_ai.server.time_to_first_token` and `gen_ai.server.time_per_output_token` (s):
 *   succeeded streams, as the conventions define them (per output token as /metrics: after
 *   the first, over completion tokens − 1, from 2 tokens on);
 * - `gen_ai.client.token.usage` ({token}): prompt tokens as `input`, completion tokens as
 *   `output` (embeddings have none), when the request reported usage.
 * Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model` (the
 * catalog model id) and `inference.deployment`. Only built when OTEL_METRICS_EXPORTER=otlp:
 * otherwise nothing of this runs, and no observer is added.
 */
export class GenAiMetrics implements RequestObserver {
  private readonly duration: Histogram;
  private readonly timeToFirstToken: Histogram;
  private readonly timePerOutputToken: Histogram;
  private readonly tokenUsage: Histogram;
  /** deployment label → model → endpoint → attribute sets. */
  private readonly attributes = new Map<string, Map<string, Map<string, AttributeSets>>>();

  constructor(meter: Meter, private readonly providerName: string) {
    this.duration = meter.createHistogram(REQUEST_DURATION, {
      unit: 's', description: 'Generative AI server request duration such as time-to-last byte or last output token.', advice: { explicitBucketBoundaries: DURATION_BOUNDARIES },
    });
    this.timeToFirstToken = meter.createHistogram(TIME_TO_FIRST_TOKEN, {
      unit: 's', description: 'Time to generate first token for successful responses.', advice: { explicitBucketBoundaries: TTFT_BOUNDARIES },
    });
    this.timePerOutputToken = meter.createHistogram(TIME_PER_OUTPUT_TOKEN, {
      unit: 's', description: 'Time per output token generated after the first token for successful responses.', advice: { explicitBucketBoundaries: TPOT_BOUNDARIES },
    });
    this.tokenUsage = meter.createHistogram(TOKEN_USAGE, {
      unit: '{token}', description: 'Number of input and output tokens used.', advice: { explicitBucketBoundaries: TOKEN_BOUNDARIES },
    });
  }

  requestFinished(request: FinishedRequest): void {
    const sets = this.attributeSets(request.sharedModel ?? request.deploymentId, request.model, request.endpoint);
    const { latencyMs, ttftMs, completionTokens } = request;
    const succeeded = request.outcome === 'succeeded';
    if (latencyMs >= 0) this.duration.record(latencyMs / 1000, succeeded ? sets.request : this.failedAttributes(sets, request.errorCode ?? request.outcome));
    if (succeeded && request.stream && ttftMs !== null && ttftMs >= 0) {
      this.timeToFirstToken.record(ttftMs / 1000, sets.request);
      if (completionTokens >= 2 && latencyMs >= ttftMs) this.timePerOutputToken.record((latencyMs - ttftMs) / 1000 / (completionTokens - 1), sets.request);
    }
    if (request.promptTokens + completionTokens > 0) {
      this.tokenUsage.record(request.promptTokens, sets.input);
      if (request.endpoint !== 'embeddings') this.tokenUsage.record(completionTokens, sets.output);
    }
  }

  private attributeSets(deployment: string, model: string, endpoint: string): AttributeSets {
    let byModel = this.attributes.get(deployment);
    if (!byModel) this.attributes.set(deployment, (byModel = new Map()));
    let byEndpoint = byModel.get(model);
    if (!byEndpoint) byModel.set(model, (byEndpoint = new Map()));
    let sets = byEndpoint.get(endpoint);
    if (!sets) {
      const request: Attributes = {
        [OPERATION_NAME]: OPERATIONS[endpoint] ?? OTHER, [PROVIDER_NAME]: this.providerName, [REQUEST_MODEL]: model, [DEPLOYMENT]: deployment,
      };
      sets = { request, input: { ...request, [TOKEN_TYPE]: 'input' }, output: { ...request, [TOKEN_TYPE]: 'output' }, failed: new Map() };
      byEndpoint.set(endpoint, sets);
    }
    return sets;
  }

  private failedAttributes(sets: AttributeSets, code: string): Attributes {
    const errorType = KNOWN_ERRORS.has(code) ? code : OTHER;
    let attributes = sets.failed.get(errorType);
    if (!attributes) sets.failed.set(errorType, (attributes = { ...sets.request, [ERROR_TYPE]: errorType }));
    return attributes;
  }
}

/** The GenAI metrics and what exports them; `shutdown` sends what is left and stops the timer. */
export interface OtelMetrics {
  readonly observer: GenAiMetrics;
  shutdown(): Promise<void>;
}

const TEMPORALITY = {
  cumulative: AggregationTemporalityPreference.CUMULATIVE, delta: AggregationTemporalityPreference.DELTA, lowmemory: AggregationTemporalityPreference.LOWMEMORY,
} as const;

/**
 * Starts the OTLP/HTTP export of the GenAI metrics (a MeterProvider of its own, not the global
 * one: several servers share a test process, and tracing sets up its own providers).
 */
export function startOtelMetrics(config: OtelMetricsConfig, serviceInstanceId: string, logger: Logger): OtelMetrics {
  const exporter = new ReportingExporter(new OTLPMetricExporter({
    url: config.url, headers: { ...config.headers }, timeoutMillis: config.exportTimeoutMs, temporalityPreference: TEMPORALITY[config.temporality],
  }), config.url, logger);
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName, 'service.instance.id': serviceInstanceId }),
    readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: config.exportIntervalMs, exportTimeoutMillis: config.readerTimeoutMs })],
  });
  const observer = new GenAiMetrics(provider.getMeter('inference-platform'), config.serviceName);
  return {
    observer,
    async shutdown() {
      try {
        await provider.shutdown();
      } catch (error) {
        logger.warn({ err: error }, 'the last OpenTelemetry metrics export failed');
      }
    },
  };
}

/**
 * The OTLP exporter, with its failures logged here: the SDK reports them only to its own
 * diagnostic logger, silent unless set globally. Logged when exports start failing and when they
 * recover, not once a minute while a collector is down.
 */
class ReportingExporter implements PushMetricExporter {
  private failing = false;

  constructor(private readonly exporter: OTLPMetricExporter, private readonly url: string, private readonly logger: Logger) {}

  export(metrics: ResourceMetrics, resultCallback: (result: ExportResult) => void): void {
    this.exporter.export(metrics, (result) => {
      const failed = result.code !== ExportResultCode.SUCCESS;
      if (failed && !this.failing) this.logger.warn({ err: result.error, url: this.url }, 'OpenTelemetry metrics export failed; retrying at the next interval');
      if (!failed && this.failing) this.logger.info({ url: this.url }, 'OpenTelemetry metrics export works again');
      this.failing = failed;
      resultCallback(result);
    });
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  selectAggregationTemporality(type: InstrumentType): AggregationTemporality {
    return this.exporter.selectAggregationTemporality(type);
  }
}
