import type { z } from 'zod';
import { ADAPTER_SETTINGS, loadAdapterConfig, type AdapterConfig } from './adapters/adapter-config';
import { BATCH_SETTINGS, loadBatchConfig, type BatchConfig } from './batches/batch-config';
import { loadBudgetLimits, type BudgetLimits } from './budgets/budget-config';
import { BUDGET_NAMES, BUDGETS, type BudgetName, type BudgetScope } from './budgets/budget-kinds';
import { CONTROL_PLANE_SETTINGS, loadControlPlaneConfig } from './config/control-plane-config';
import { loadRequestConfig, REQUEST_SETTINGS, type RequestConfig } from './requests/request-config';
import { loadMetricsHistoryConfig, METRICS_HISTORY_SETTINGS, type MetricsHistoryConfig } from './metrics-history/metrics-history-config';
import { loadRequestLogConfig, REQUEST_LOG_SETTINGS, type RequestLogConfig } from './request-log/request-log-config';
import { loadResponsesConfig, RESPONSES_SETTINGS, type ResponsesConfig } from './responses/responses-config';
import { loadSharingConfig, SHARING_SETTINGS, type SharingConfig } from './sharing/sharing-config';
import { loadStorageConfig, STORAGE_SETTINGS, type StorageConfig } from './storage/storage-config';
import { loadWebhookConfig, WEBHOOK_SETTINGS, type WebhookConfig } from './webhooks/webhook-config';
import { loadOtelMetricsConfig, type OtelMetricsConfig } from './telemetry/otel-metrics-config';
import { loadTracingConfig, type TracingConfig } from './telemetry/tracing-config';

/**
 * Every control-plane setting: the control plane's own (config/control-plane-config.ts) and each
 * module's, which the module declares and validates itself. Put together here, at the
 * composition root, so that config/ (core) names no module above it.
 */
export type ControlPlaneConfig = ReturnType<typeof loadControlPlaneConfig> & {
  /** Object storage (managed outputs, customer buckets). */
  storage: StorageConfig;
  /** Image/video request records. */
  requests: RequestConfig;
  /** Webhook delivery. */
  webhooks: WebhookConfig;
  /** The Responses API's stored state (retention). */
  responses: ResponsesConfig;
  /** Shared serving: guest admission and the pool's availability. */
  sharing: SharingConfig;
  /** Files and batches (the OpenAI Batch API). */
  batches: BatchConfig;
  /** The tenant budget's default limits (budgets/budget-kinds.ts). */
  budgets: BudgetLimits;
  /** The OpenTelemetry GenAI metrics export (the standard `OTEL_*` variables); null: off, the default. */
  otelMetrics: OtelMetricsConfig | null;
  /** Per-minute deployment metrics: retention and write interval. */
  metricsHistory: MetricsHistoryConfig;
  /** The request log of text calls: retention, write interval, the stored bodies' cap. */
  requestLog: RequestLogConfig;
  /** Traces (the standard OTEL_* variables, docs/tracing.md); off unless an exporter is configured. */
  tracing: TracingConfig;
  /** LoRA adapters: the weights' size limit, adapters per workspace, their links' floor. */
  adapters: AdapterConfig;
  /** Extra env for spawned agents (tests use it for CPU-engine switches and short backoffs). */
  localAgentEnv?: Record<string, string>;
  /** Path of the compiled agent entry point. */
  agentEntry?: string;
};

/** Every control-plane setting, each concern validated by its own loader. */
export function loadFullControlPlaneConfig(env: NodeJS.ProcessEnv = process.env): ControlPlaneConfig {
  return {
    ...loadControlPlaneConfig(env), storage: loadStorageConfig(env), requests: loadRequestConfig(env), webhooks: loadWebhookConfig(env),
    responses: loadResponsesConfig(env),
    sharing: loadSharingConfig(env), batches: loadBatchConfig(env), budgets: loadBudgetLimits(env), otelMetrics: loadOtelMetricsConfig(env),
    metricsHistory: loadMetricsHistoryConfig(env), requestLog: loadRequestLogConfig(env), tracing: loadTracingConfig(env),
    adapters: loadAdapterConfig(env),
  };
}

/** What a caller (tests, `startServer`) may override; nested concerns field by field. */
export type ControlPlaneOverrides = Partial<Omit<ControlPlaneConfig, 'storage' | 'requests' | 'webhooks' | 'responses' | 'sharing' | 'batches' | 'budgets' | 'metricsHistory' | 'requestLog' | 'adapters'>> & {
  storage?: Partial<StorageConfig>;
  requests?: Partial<RequestConfig>;
  webhooks?: Partial<WebhookConfig>;
  responses?: Partial<ResponsesConfig>;
  sharing?: Partial<SharingConfig>;
  batches?: Partial<BatchConfig>;
  metricsHistory?: Partial<MetricsHistoryConfig>;
  requestLog?: Partial<RequestLogConfig>;
  adapters?: Partial<AdapterConfig>;
  /** Some scopes of some budgets; the rest keep their defaults. */
  budgets?: Partial<Record<BudgetName, Partial<Record<BudgetScope, number>>>>;
};

/** One setting as `--help` lists it: its variable, its default (undefined: unset, or computed from others), its group. */
export interface SettingRow {
  readonly env: string;
  readonly default: string | undefined;
  readonly group: string;
}

/** A module's settings as its loader declares them: a zod shape and each field's variable. */
export interface SettingsDeclaration {
  readonly what: string;
  readonly shape: Record<string, z.ZodType>;
  readonly names: Record<string, string>;
}

/** Every control-plane setting with its default, read from the loaders' own declarations (so `--help` cannot drift from them). */
export function controlPlaneSettingRows(): SettingRow[] {
  const rows = [CONTROL_PLANE_SETTINGS, STORAGE_SETTINGS, REQUEST_SETTINGS, WEBHOOK_SETTINGS, RESPONSES_SETTINGS, SHARING_SETTINGS, BATCH_SETTINGS, METRICS_HISTORY_SETTINGS, REQUEST_LOG_SETTINGS, ADAPTER_SETTINGS]
    .flatMap((declaration) => settingRows(declaration as SettingsDeclaration));
  for (const name of BUDGET_NAMES) {
    for (const limit of Object.values(BUDGETS[name].limits) as { env: string; default: number }[]) rows.push({ env: limit.env, default: String(limit.default), group: 'tenant budget' });
  }
  return rows;
}

/** A declaration's rows: the default is what the field parses to when its variable is unset. */
export function settingRows(declaration: SettingsDeclaration): SettingRow[] {
  return Object.entries(declaration.names).map(([key, env]) => {
    const parsed = declaration.shape[key]?.safeParse(undefined);
    const value = parsed?.success ? parsed.data : undefined;
    return { env, default: value === undefined ? undefined : String(value), group: declaration.what };
  });
}
