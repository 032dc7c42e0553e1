/**
 * The standard OpenTelemetry environment variables a process reads to trace (the server and the
 * worker agent alike): which exporter, where it sends, how it samples, what the service is
 * called. Tracing is off unless an exporter is configured: `OTEL_TRACES_EXPORTER=otlp`, or an
 * OTLP endpoint with `OTEL_TRACES_EXPORTER` unset. Every variable read here is checked whether
 * tracing is on or not, so a typo fails the start instead of silently tracing nothing.
 */
import { OtelSettingError } from './otel-setting-error';
import { absoluteTlsPaths, readOtlpTls, type OtlpTls } from './otlp-tls';

/**
 * How spans travel to the receiver (`OTEL_EXPORTER_OTLP_PROTOCOL`): OTLP over HTTP with
 * protobuf bodies (the specification's default) or JSON ones. Every OTLP/HTTP receiver (the
 * Collector, Jaeger, Tempo) takes both on its port 4318; protobuf costs the process less per span.
 */
export type OtlpProtocol = 'http/protobuf' | 'http/json';

/** How the sampler decides (OpenTelemetry's `OTEL_TRACES_SAMPLER` values this build supports). */
export type SamplerKind = 'always_on' | 'always_off' | 'traceidratio';

export interface TracingSettings {
  /** `service.name` of every span's resource. */
  readonly serviceName: string;
  /** `OTEL_RESOURCE_ATTRIBUTES`, decoded (service.name among them when set there). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** The OTLP/HTTP traces URL spans are POSTed to. */
  readonly endpoint: string;
  /** The bodies' encoding (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`; `http/protobuf` when neither is set). */
  readonly protocol: OtlpProtocol;
  /** Extra headers of each export (`OTEL_EXPORTER_OTLP_HEADERS`, `…_TRACES_HEADERS`): an API key of a hosted backend. */
  readonly headers: Readonly<Record<string, string>>;
  /** How long one export may take. */
  readonly exportTimeoutMs: number;
  readonly sampler: {
    readonly kind: SamplerKind;
    /** Follow the caller's sampled flag when a `traceparent` came in (the `parentbased_` samplers). */
    readonly parentBased: boolean;
    /** `traceidratio`: the share of traces kept, 0–1. */
    readonly ratio: number;
  };
  /** An https endpoint's certificates (`OTEL_EXPORTER_OTLP_CERTIFICATE`, `…_CLIENT_CERTIFICATE`, `…_CLIENT_KEY`); absent when none is set. */
  readonly tls?: OtlpTls;
  /** The batch span processor (`OTEL_BSP_*`). */
  readonly batch: {
    readonly scheduleDelayMs: number;
    readonly maxQueueSize: number;
    readonly maxExportBatchSize: number;
    readonly exportTimeoutMs: number;
  };
}

export { OtelSettingError } from './otel-setting-error';

/** Where OTLP/HTTP receivers listen by default (the OpenTelemetry Collector, Jaeger, Tempo). */
export const DEFAULT_OTLP_ENDPOINT = 'http://localhost:4318';
const SAMPLERS: Record<string, { kind: SamplerKind; parentBased: boolean }> = {
  always_on: { kind: 'always_on', parentBased: false },
  always_off: { kind: 'always_off', parentBased: false },
  traceidratio: { kind: 'traceidratio', parentBased: false },
  parentbased_always_on: { kind: 'always_on', parentBased: true },
  parentbased_always_off: { kind: 'always_off', parentBased: true },
  parentbased_traceidratio: { kind: 'traceidratio', parentBased: true },
};

/**
 * The tracing settings `env` asks for, or null when tracing is off. `defaultServiceName` names
 * the process when neither `OTEL_SERVICE_NAME` nor `OTEL_RESOURCE_ATTRIBUTES` does. Throws
 * OtelSettingError naming the first variable it refuses.
 */
export function readTracingSettings(env: NodeJS.ProcessEnv, defaultServiceName: string): TracingSettings | null {
  const read = (name: string): string | undefined => {
    const value = env[name]?.trim();
    return value ? value : undefined;
  };
  const disabled = booleanOf(read('OTEL_SDK_DISABLED'), 'OTEL_SDK_DISABLED');
  const exporter = exporterOf(read('OTEL_TRACES_EXPORTER'));
  const tracesEndpoint = read('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = read('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (tracesEndpoint !== undefined) httpUrl(tracesEndpoint, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  if (baseEndpoint !== undefined) httpUrl(baseEndpoint, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  // Both are checked (a bad general one fails the start even when the traces one overrides it); the traces one wins.
  const generalProtocol = protocolOf(read('OTEL_EXPORTER_OTLP_PROTOCOL'), 'OTEL_EXPORTER_OTLP_PROTOCOL');
  const protocol = protocolOf(read('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'), 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ?? generalProtocol ?? 'http/protobuf';
  const resourceAttributes = keyValues(read('OTEL_RESOURCE_ATTRIBUTES'), 'OTEL_RESOURCE_ATTRIBUTES');
  const headers = {
    ...keyValues(read('OTEL_EXPORTER_OTLP_HEADERS'), 'OTEL_EXPORTER_OTLP_HEADERS'),
    ...keyValues(read('OTEL_EXPORTER_OTLP_TRACES_HEADERS'), 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'),
  };
  const timeoutName = read('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') !== undefined ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT';
  const exportTimeoutMs = integerOf(read(timeoutName), timeoutName, 10_000, 1);
  const sampler = samplerOf(read('OTEL_TRACES_SAMPLER'), read('OTEL_TRACES_SAMPLER_ARG'));
  const batch = {
    scheduleDelayMs: integerOf(read('OTEL_BSP_SCHEDULE_DELAY'), 'OTEL_BSP_SCHEDULE_DELAY', 5_000, 0),
    maxQueueSize: integerOf(read('OTEL_BSP_MAX_QUEUE_SIZE'), 'OTEL_BSP_MAX_QUEUE_SIZE', 2_048, 1),
    maxExportBatchSize: integerOf(read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'), 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', 512, 1),
    exportTimeoutMs: integerOf(read('OTEL_BSP_EXPORT_TIMEOUT'), 'OTEL_BSP_EXPORT_TIMEOUT', 30_000, 1),
  };
  if (batch.maxExportBatchSize > batch.maxQueueSize) {
    throw new OtelSettingError('OTEL_BSP_MAX_EXPORT_BATCH_SIZE', `${batch.maxExportBatchSize} is more than OTEL_BSP_MAX_QUEUE_SIZE (${batch.maxQueueSize})`);
  }
  const serviceName = read('OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? defaultServiceName;
  const tls = readOtlpTls(read);

  // Off by default: only an exporter someone asked for turns tracing on (the spec's default, otlp to localhost, would not).
  const on = !disabled && (exporter === 'otlp' || (exporter === undefined && (tracesEndpoint ?? baseEndpoint) !== undefined));
  if (!on) return null;
  const endpoint = tracesEndpoint ?? `${(baseEndpoint ?? DEFAULT_OTLP_ENDPOINT).replace(/\/+$/, '')}/v1/traces`;
  return { serviceName, resourceAttributes, endpoint, protocol, headers, exportTimeoutMs, sampler, batch, ...(tls ? { tls } : {}) };
}

/**
 * The OTEL_* variables an agent this process spawns should trace with: the same exporter,
 * sampler and resource, but not the service name, so the agent names itself (a server's
 * `OTEL_SERVICE_NAME` on its agents would make the two indistinguishable in a trace). Certificate
 * paths go as absolute paths, so an agent started in another directory reads the same files.
 */
export function tracingEnvForChildren(env: NodeJS.ProcessEnv): Record<string, string> {
  const forwarded: Record<string, string> = {};
  for (const [name, value] of Object.entries(env)) {
    if (name.startsWith('OTEL_') && name !== 'OTEL_SERVICE_NAME' && value !== undefined) forwarded[name] = value;
  }
  return absoluteTlsPaths(forwarded);
}

function exporterOf(value: string | undefined): 'otlp' | 'none' | undefined {
  if (value === undefined) return undefined;
  const names = value.split(',').map((name) => name.trim().toLowerCase()).filter(Boolean);
  if (names.length === 1 && (names[0] === 'otlp' || names[0] === 'none')) return names[0];
  throw new OtelSettingError('OTEL_TRACES_EXPORTER', `'${value}' is not supported; use otlp (OTLP over HTTP) or none`);
}

/** The OTLP protocol a variable names (undefined when unset). This build carries no gRPC exporter: `grpc` is refused rather than sent as HTTP to a gRPC port, which would fail every export. */
export function protocolOf(value: string | undefined, name: string): OtlpProtocol | undefined {
  if (value === undefined) return undefined;
  if (value === 'http/protobuf' || value === 'http/json') return value;
  throw new OtelSettingError(name, `'${value}' is not supported: this build exports OTLP over HTTP; set http/protobuf (the default) or http/json (the OpenTelemetry Collector, Jaeger and Tempo take both on their OTLP/HTTP port, 4318) or leave it unset`);
}

function samplerOf(value: string | undefined, argument: string | undefined): TracingSettings['sampler'] {
  const chosen = SAMPLERS[(value ?? 'parentbased_always_on').toLowerCase()];
  if (!chosen) throw new OtelSettingError('OTEL_TRACES_SAMPLER', `'${value}' is not supported; use one of ${Object.keys(SAMPLERS).join(', ')}`);
  if (chosen.kind !== 'traceidratio') return { ...chosen, ratio: 1 };
  const ratio = argument === undefined ? 1 : Number(argument);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new OtelSettingError('OTEL_TRACES_SAMPLER_ARG', `'${argument}' is not a ratio from 0 to 1 (the share of traces ${value} keeps)`);
  }
  return { ...chosen, ratio };
}

function booleanOf(value: string | undefined, name: string): boolean {
  if (value === undefined) return false;
  const lower = value.toLowerCase();
  if (lower === 'true') return true;
  if (lower === 'false') return false;
  throw new OtelSettingError(name, `'${value}' is not true or false`);
}

function integerOf(value: string | undefined, name: string, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  const parsed = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(parsed) || parsed < min) {
    throw new OtelSettingError(name, `'${value}' is not a whole number of at least ${min}`);
  }
  return parsed;
}

/** Throws unless `value` is an http or https URL (an OTLP endpoint). Shared with the metrics exporter's settings. */
export function httpUrl(value: string, name: string): void {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new OtelSettingError(name, `'${value}' is not a URL (e.g. http://otel-collector:4318)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OtelSettingError(name, `'${value}' is not an http or https URL`);
}

/** `key1=value1,key2=value2` with percent-encoded values (W3C Baggage's format, which OTEL_RESOURCE_ATTRIBUTES and the header lists use). */
export function keyValues(value: string | undefined, name: string): Record<string, string> {
  const pairs: Record<string, string> = {};
  if (value === undefined) return pairs;
  for (const entry of value.split(',')) {
    if (!entry.trim()) continue;
    const equals = entry.indexOf('=');
    const key = equals > 0 ? entry.slice(0, equals).trim() : '';
    if (!key) throw new OtelSettingError(name, `'${entry.trim()}' is not key=value`);
    try {
      pairs[key] = decodeURIComponent(entry.slice(equals + 1).trim());
    } catch {
      throw new OtelSettingError(name, `the value of '${key}' is not valid percent-encoding`);
    }
  }
  return pairs;
}
