import { type Attributes, type HrTime, ValueType } from '@opentelemetry/api';
import { ExportResultCode, hrTime, type ExportResult } from '@opentelemetry/core';
import { AggregationTemporalityPreference, OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { emptyResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AggregationTemporality, type CollectionResult, DataPointType, type HistogramMetricData, type InstrumentType, MeterProvider, type MetricProducer,
  PeriodicExportingMetricReader, type PushMetricExporter, type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import type { Logger } from 'pino';
import { sdkAgentOptions } from '../../common/tracing/otlp-tls';
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

/** An instrument of the conventions: its name, description, unit and advised bucket boundaries. */
interface Instrument {
  readonly name: string;
  readonly description: string;
  readonly unit: string;
  readonly valueType: ValueType;
  readonly boundaries: readonly number[];
}

const DURATION: Instrument = {
  name: REQUEST_DURATION, description: 'Generative AI server request duration such as time-to-last byte or last output token.', unit: 's', valueType: ValueType.DOUBLE,
  boundaries: [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92],
};
const FIRST_TOKEN: Instrument = {
  name: TIME_TO_FIRST_TOKEN, description: 'Time to generate first token for successful responses.', unit: 's', valueType: ValueType.DOUBLE,
  boundaries: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10],
};
const PER_OUTPUT_TOKEN: Instrument = {
  name: TIME_PER_OUTPUT_TOKEN, description: 'Time per output token generated after the first token for successful responses.', unit: 's', valueType: ValueType.DOUBLE,
  boundaries: [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5],
};
const TOKENS: Instrument = {
  name: TOKEN_USAGE, description: 'Number of input and output tokens used.', unit: '{token}', valueType: ValueType.INT,
  boundaries: [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864],
};
const INSTRUMENTS = [DURATION, FIRST_TOKEN, PER_OUTPUT_TOKEN, TOKENS];

/** Our endpoints as `gen_ai.operation.name` values (a Responses turn is a chat on the engine). */
const OPERATIONS: Readonly<Record<string, string>> = {
  'chat.completions': 'chat', responses: 'chat', completions: 'text_completion', embeddings: 'embeddings',
};
const OTHER = '_OTHER';
const KNOWN_ERRORS = new Set<string>(ERROR_CODES.filter((code) => code !== 'none' && code !== 'other'));

/** One data point: an instrument's observations under one attribute set, as plain numbers. */
class Point {
  /** Per bucket, the last one above every boundary. */
  readonly counts: Float64Array;
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  startTime: HrTime;

  constructor(readonly instrument: Instrument, readonly attributes: Attributes) {
    this.counts = new Float64Array(instrument.boundaries.length + 1);
    this.startTime = hrTime();
  }

  record(value: number): void {
    const bounds = this.instrument.boundaries;
    let index = 0;
    while (index < bounds.length && value > bounds[index]) index++;
    this.counts[index]++;
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
  }
}

/** The points of one deployment label, model and operation. */
interface PointSet {
  readonly duration: Point;
  readonly firstToken: Point;
  readonly perOutputToken: Point;
  readonly input: Point;
  readonly output: Point;
  /** The duration of failed and canceled requests, by `error.type`. */
  readonly failed: Map<string, Point>;
}

/**
 * The GenAI metrics of every settled text request, as the OpenTelemetry conventions name them:
 * - `gen_ai.server.request.duration` (s): admission to settlement, every outcome, batch lines
 *   aside (they wait for free capacity by design); `error.type`
 *   on a failed or canceled request (its code, from a closed set, else `_OTHER`);
 * - `gen_ai.server.time_to_first_token` and `gen_ai.server.time_per_output_token` (s):
 *   succeeded streams, as the conventions define them (per output token as /metrics: after
 *   the first, over completion tokens − 1, from 2 tokens on);
 * - `gen_ai.client.token.usage` ({token}): prompt tokens as `input`, completion tokens as
 *   `output` (embeddings have none), when the request reported usage.
 * Attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model` (the
 * catalog model id) and `inference.deployment`.
 *
 * Recorded as the Prometheus series are: plain numbers in points cached per attribute set, read
 * when the periodic reader collects (this is a MetricProducer of its reader). Through the SDK's
 * own histograms each record hashes its attribute set again: ~5 µs per request for the five
 * records of a stream, measured (bench/run-request-metrics.ts), against ~0.1 µs here. Only built
 * when OTEL_METRICS_EXPORTER=otlp: otherwise nothing of this runs, and no observer is added.
 */
export class GenAiMetrics implements RequestObserver, MetricProducer {
  /** deployment label → model → endpoint → points. */
  private readonly sets = new Map<string, Map<string, Map<string, PointSet>>>();
  private readonly points: Point[] = [];

  constructor(private readonly providerName: string, private readonly temporality: AggregationTemporality = AggregationTemporality.CUMULATIVE) {}

  requestFinished(request: FinishedRequest): void {
    const set = this.pointSet(request.sharedModel ?? request.deploymentId, request.model, request.endpoint);
    const { latencyMs, ttftMs, completionTokens } = request;
    const succeeded = request.outcome === 'succeeded';
    if (latencyMs >= 0 && request.batchId === undefined) (succeeded ? set.duration : this.failedPoint(set, request.errorCode ?? request.outcome)).record(latencyMs / 1000);
    if (succeeded && request.stream && ttftMs !== null && ttftMs >= 0) {
      set.firstToken.record(ttftMs / 1000);
      if (completionTokens >= 2 && latencyMs >= ttftMs) set.perOutputToken.record((latencyMs - ttftMs) / 1000 / (completionTokens - 1));
    }
    if (request.promptTokens + completionTokens > 0) {
      set.input.record(request.promptTokens);
      if (request.endpoint !== 'embeddings') set.output.record(completionTokens);
    }
  }

  /** MetricProducer: every point with observations, cumulative since it was made or (delta) since the last collection. */
  async collect(): Promise<CollectionResult> {
    const endTime = hrTime();
    const delta = this.temporality === AggregationTemporality.DELTA;
    const metrics: HistogramMetricData[] = INSTRUMENTS.map((instrument) => ({
      descriptor: { name: instrument.name, description: instrument.description, unit: instrument.unit, valueType: instrument.valueType },
      aggregationTemporality: this.temporality, dataPointType: DataPointType.HISTOGRAM, dataPoints: [],
    }));
    for (const point of this.points) {
      if (point.count === 0) continue;
      metrics[INSTRUMENTS.indexOf(point.instrument)].dataPoints.push({
        startTime: point.startTime, endTime, attributes: point.attributes,
        value: { buckets: { boundaries: [...point.instrument.boundaries], counts: [...point.counts] }, count: point.count, sum: point.sum, min: point.min, max: point.max },
      });
      if (delta) {
        point.counts.fill(0);
        point.count = 0;
        point.sum = 0;
        point.min = Infinity;
        point.max = -Infinity;
        point.startTime = endTime;
      }
    }
    return {
      // The reader exports these under its provider's resource, not this one.
      resourceMetrics: { resource: emptyResource(), scopeMetrics: [{ scope: { name: 'inference-platform' }, metrics: metrics.filter((metric) => metric.dataPoints.length > 0) }] },
      errors: [],
    };
  }

  private pointSet(deployment: string, model: string, endpoint: string): PointSet {
    let byModel = this.sets.get(deployment);
    if (!byModel) this.sets.set(deployment, (byModel = new Map()));
    let byEndpoint = byModel.get(model);
    if (!byEndpoint) byModel.set(model, (byEndpoint = new Map()));
    let set = byEndpoint.get(endpoint);
    if (!set) {
      const request: Attributes = {
        [OPERATION_NAME]: OPERATIONS[endpoint] ?? OTHER, [PROVIDER_NAME]: this.providerName, [REQUEST_MODEL]: model, [DEPLOYMENT]: deployment,
      };
      set = {
        duration: this.point(DURATION, request), firstToken: this.point(FIRST_TOKEN, request), perOutputToken: this.point(PER_OUTPUT_TOKEN, request),
        input: this.point(TOKENS, { ...request, [TOKEN_TYPE]: 'input' }), output: this.point(TOKENS, { ...request, [TOKEN_TYPE]: 'output' }), failed: new Map(),
      };
      byEndpoint.set(endpoint, set);
    }
    return set;
  }

  private failedPoint(set: PointSet, code: string): Point {
    const errorType = KNOWN_ERRORS.has(code) ? code : OTHER;
    let point = set.failed.get(errorType);
    if (!point) set.failed.set(errorType, (point = this.point(DURATION, { ...set.duration.attributes, [ERROR_TYPE]: errorType })));
    return point;
  }

  private point(instrument: Instrument, attributes: Attributes): Point {
    const point = new Point(instrument, attributes);
    this.points.push(point);
    return point;
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
    ...sdkAgentOptions(config.tls),
  }), config.url, logger);
  // Histograms are delta under the `delta` and `lowmemory` preferences (the OTLP exporter's own rule).
  const observer = new GenAiMetrics(config.serviceName, config.temporality === 'cumulative' ? AggregationTemporality.CUMULATIVE : AggregationTemporality.DELTA);
  const provider = new MeterProvider({
    resource: resourceFromAttributes({ ...config.resourceAttributes, 'service.name': config.serviceName, 'service.instance.id': serviceInstanceId }),
    readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: config.exportIntervalMs, exportTimeoutMillis: config.readerTimeoutMs, metricProducers: [observer] })],
  });
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
