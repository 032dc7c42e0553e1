import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createSecureContext } from 'node:tls';
import { OtelSettingError } from './otel-setting-error';

/** The PEM files of an https OTLP endpoint: a CA to trust instead of Node's bundled ones, and a client certificate with its key (mutual TLS). */
export interface OtlpTls {
  readonly ca?: string;
  readonly cert?: string;
  readonly key?: string;
}

/** OpenTelemetry's certificate variables (each also per signal, `OTEL_EXPORTER_OTLP_TRACES_…`, which wins), by what they hold. */
const VARIABLES = { ca: 'CERTIFICATE', cert: 'CLIENT_CERTIFICATE', key: 'CLIENT_KEY' } as const;

/** Every name the certificate variables go by: file paths, made absolute for a child process that may run elsewhere. */
export const OTLP_TLS_VARIABLES: readonly string[] = Object.values(VARIABLES)
  .flatMap((suffix) => [`OTEL_EXPORTER_OTLP_${suffix}`, `OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_METRICS_${suffix}`]);

/**
 * The certificates the variables name, read at start (paths relative to the working directory,
 * as the OpenTelemetry SDK reads them). The SDK only warns when a file cannot be read and then
 * exports without it; here a file that cannot be read or parsed, or a client certificate without
 * its key (or a key without its certificate), refuses the start with the variable's name.
 * Undefined when none is set.
 */
export function readOtlpTls(read: (name: string) => string | undefined, signal: 'TRACES' | 'METRICS' = 'TRACES'): OtlpTls | undefined {
  const files: Partial<Record<keyof OtlpTls, { name: string; pem: string }>> = {};
  for (const [field, suffix] of Object.entries(VARIABLES) as Array<[keyof OtlpTls, string]>) {
    const specific = `OTEL_EXPORTER_OTLP_${signal}_${suffix}`;
    const name = read(specific) !== undefined ? specific : `OTEL_EXPORTER_OTLP_${suffix}`;
    const file = read(name);
    if (file === undefined) continue;
    try {
      files[field] = { name, pem: readFileSync(path.resolve(file), 'utf8') };
    } catch (error) {
      throw new OtelSettingError(name, `cannot read '${file}' (${(error as NodeJS.ErrnoException).code ?? 'unreadable'})`);
    }
  }
  const { ca, cert, key } = files;
  if (!ca && !cert && !key) return undefined;
  if (Boolean(cert) !== Boolean(key)) {
    const missing = cert ? 'OTEL_EXPORTER_OTLP_CLIENT_KEY' : 'OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE';
    throw new OtelSettingError(missing, `is needed with ${(cert ?? key)!.name}: a client certificate goes with its private key`);
  }
  // A CA file that is not PEM is ignored by TLS without a word (every export would then fail verification): its first certificate must parse.
  if (ca) parsed(ca.name, () => new X509Certificate(ca.pem));
  if (cert && key) parsed(key.name, () => createSecureContext({ cert: cert.pem, key: key.pem }));
  return { ...(ca ? { ca: ca.pem } : {}), ...(cert && key ? { cert: cert.pem, key: key.pem } : {}) };
}

/**
 * The SDK exporters' option for `tls` (the JSON trace exporter, the metrics exporter): their own
 * keep-alive agent, given the certificates; nothing when there are none (the SDK's defaults).
 */
export function sdkAgentOptions(tls: OtlpTls | undefined): { httpAgentOptions?: { keepAlive: true } & OtlpTls } {
  return tls ? { httpAgentOptions: { keepAlive: true, ...tls } } : {};
}

/** The variables with their file paths made absolute against this process's working directory. */
export function absoluteTlsPaths(env: Record<string, string>): Record<string, string> {
  const resolved = { ...env };
  for (const name of OTLP_TLS_VARIABLES) if (resolved[name]?.trim()) resolved[name] = path.resolve(resolved[name].trim());
  return resolved;
}

function parsed(name: string, check: () => unknown): void {
  try {
    check();
  } catch (error) {
    throw new OtelSettingError(name, `is not a PEM file Node can use (${(error as Error).message})`);
  }
}
