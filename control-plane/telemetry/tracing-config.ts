import { OtelSettingError, readTracingSettings, tracingEnvForChildren, type TracingSettings } from '../../common/tracing/otel-settings';
import { ConfigError } from '../config/env-fields';

/** The server's `service.name` when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES names it. */
export const SERVER_SERVICE_NAME = 'inference-platform';

/** What the server traces with (OTEL_*, docs/tracing.md), and what its local agents are started with. */
export interface TracingConfig {
  /** Null: tracing is off (no exporter configured), and nothing is traced. */
  readonly settings: TracingSettings | null;
  /** The OTEL_* variables local agents get (all but OTEL_SERVICE_NAME: an agent names itself). */
  readonly agentEnv: Readonly<Record<string, string>>;
}

/** Reads the OTEL_* variables; a value it refuses is a ConfigError naming the variable (the server exits 2). */
export function loadTracingConfig(env: NodeJS.ProcessEnv = process.env): TracingConfig {
  try {
    return { settings: readTracingSettings(env, SERVER_SERVICE_NAME), agentEnv: tracingEnvForChildren(env) };
  } catch (error) {
    if (error instanceof OtelSettingError) throw new ConfigError(error.message, { cause: error });
    throw error;
  }
}
