import { ConfigError } from '../config/env-fields';
import { httpUrl, keyValues as otlpKeyValues, OtelSettingError } from '../../common/tracing/otel-settings';
import { readOtlpTls, type OtlpTls } from '../../common/tracing/otlp-tls';

/** How finished requests' OpenTelemetry GenAI metrics are exported (otel-metrics.ts); null when they are not. */
export interface OtelMetricsConfig {
  /** The OTLP/HTTP metrics URL, e.g. `http://collector:4318/v1/metrics`. */
  readonly url: string;
  /** Sent with every export (an API key of a hosted backend). */
  readonly headers: Readonly<Record<string, string>>;
  /** One export request's timeout. @default 10000 */
  readonly exportTimeoutMs: number;
  /** Time between two exports. @default 60000 */
  readonly exportIntervalMs: number;
  /** How long the periodic reader waits for one whole collection and export. @default 30000, at most the interval */
  readonly readerTimeoutMs: number;
  readonly temporality: 'cumulative' | 'delta' | 'lowmemory';
  /** `service.name` of the resource. @default inference-platform */
  readonly serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES, parsed. */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** An https endpoint's certificates (`OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE`, …), read at start as tracing reads its own; absent when none is set. */
  readonly tls?: OtlpTls;
}

const DEFAULT_URL = 'http://localhost:4318/v1/metrics';
export const DEFAULT_SERVICE_NAME = 'inference-platform';

/**
 * The standard OpenTelemetry variables (the SDK environment specification), read from `env`
 * rather than process.env so a test or a second server in one process has its own:
 * - `OTEL_METRICS_EXPORTER`: `otlp` turns the export on; unset or `none` leaves it off (off by
 *   default, unlike the specification's `otlp`: a server with no collector would fail an
 *   export every minute). `OTEL_SDK_DISABLED=true` turns it off whatever else is set.
 * - `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` (used as given) or `OTEL_EXPORTER_OTLP_ENDPOINT`
 *   (+ `/v1/metrics`); `…_HEADERS`, `…_TIMEOUT`, `…_PROTOCOL` likewise, the metrics variable first.
 * - `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_METRIC_EXPORT_TIMEOUT` (ms),
 *   `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`.
 * - the certificate files of an https endpoint, as tracing reads them (common/tracing/otlp-tls.ts).
 * Metrics go as `http/json`, the one protocol the installed metrics exporter speaks. The shared
 * `OTEL_EXPORTER_OTLP_PROTOCOL` may say `http/protobuf` (tracing's default, which it follows);
 * metrics still go as JSON to the same OTLP/HTTP port, which takes both. `grpc`, or protobuf asked
 * for metrics by name, is refused at start rather than sent as JSON where something else is expected.
 */
export function loadOtelMetricsConfig(env: NodeJS.ProcessEnv = process.env): OtelMetricsConfig | null {
  const read = (name: string) => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  if (read('OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return null;
  const exporters = (read('OTEL_METRICS_EXPORTER') ?? 'none').split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
  const unknown = exporters.filter((name) => name !== 'otlp' && name !== 'none');
  if (unknown.length > 0) throw new ConfigError(`OTEL_METRICS_EXPORTER: '${unknown[0]}' is not supported (use otlp or none)`);
  if (!exporters.includes('otlp')) return null;

  // The metrics exporter this build carries speaks JSON only. The shared variable's http/protobuf
  // (the specification's default, which tracing follows) is accepted and metrics still go as JSON:
  // every OTLP/HTTP receiver takes both on one port. Asking for protobuf metrics by name, or grpc, is refused.
  const metricsProtocol = read('OTEL_EXPORTER_OTLP_METRICS_PROTOCOL');
  const sharedProtocol = read('OTEL_EXPORTER_OTLP_PROTOCOL');
  if (metricsProtocol !== undefined && metricsProtocol !== 'http/json') {
    throw new ConfigError(`OTEL_EXPORTER_OTLP_METRICS_PROTOCOL: '${metricsProtocol}' is not supported for metrics (only http/json)`);
  }
  if (sharedProtocol !== undefined && sharedProtocol !== 'http/json' && sharedProtocol !== 'http/protobuf') {
    throw new ConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL: '${sharedProtocol}' is not supported (http/protobuf or http/json; metrics are sent as http/json)`);
  }
  const signalEndpoint = read('OTEL_EXPORTER_OTLP_METRICS_ENDPOINT');
  const baseEndpoint = read('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (signalEndpoint) checkUrl(signalEndpoint, 'OTEL_EXPORTER_OTLP_METRICS_ENDPOINT');
  else if (baseEndpoint) checkUrl(baseEndpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const url = signalEndpoint ?? (baseEndpoint ? `${baseEndpoint.replace(/\/+$/, '')}/v1/metrics` : DEFAULT_URL);

  const exportIntervalMs = milliseconds(env, 'OTEL_METRIC_EXPORT_INTERVAL', 60_000);
  const temporality = (read('OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE') ?? 'cumulative').toLowerCase();
  if (temporality !== 'cumulative' && temporality !== 'delta' && temporality !== 'lowmemory') {
    throw new ConfigError(`OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: '${temporality}' is not one of cumulative, delta, lowmemory`);
  }
  const tls = asConfigError(() => readOtlpTls(read, 'METRICS'));
  return {
    url,
    headers: {
      ...keyValues(read('OTEL_EXPORTER_OTLP_HEADERS'), 'OTEL_EXPORTER_OTLP_HEADERS'),
      ...keyValues(read('OTEL_EXPORTER_OTLP_METRICS_HEADERS'), 'OTEL_EXPORTER_OTLP_METRICS_HEADERS'),
    },
    exportTimeoutMs: env.OTEL_EXPORTER_OTLP_METRICS_TIMEOUT?.trim()
      ? milliseconds(env, 'OTEL_EXPORTER_OTLP_METRICS_TIMEOUT', 10_000) : milliseconds(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000),
    exportIntervalMs,
    // The SDK refuses a reader timeout longer than its interval.
    readerTimeoutMs: Math.min(milliseconds(env, 'OTEL_METRIC_EXPORT_TIMEOUT', 30_000), exportIntervalMs),
    temporality,
    serviceName: read('OTEL_SERVICE_NAME') ?? DEFAULT_SERVICE_NAME,
    resourceAttributes: keyValues(read('OTEL_RESOURCE_ATTRIBUTES'), 'OTEL_RESOURCE_ATTRIBUTES'),
    ...(tls ? { tls } : {}),
  };
}

function milliseconds(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = env[name]?.trim();
  if (!text) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1 || value > 86_400_000) throw new ConfigError(`${name}: expected a whole number of milliseconds from 1 to 86400000, got '${text}'`);
  return value;
}

/** The OTLP settings' shared readers (common/tracing/otel-settings.ts), their refusal a ConfigError as the rest of this file's. */
function checkUrl(text: string, variable: string): void {
  asConfigError(() => httpUrl(text, variable));
}

function keyValues(text: string | undefined, variable: string): Record<string, string> {
  return asConfigError(() => otlpKeyValues(text, variable));
}

function asConfigError<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (error instanceof OtelSettingError) throw new ConfigError(`${error.variable}: ${error.problem}`);
    throw error;
  }
}
