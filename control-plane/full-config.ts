import { loadBatchConfig, type BatchConfig } from './batches/batch-config';
import { loadBudgetLimits, type BudgetLimits } from './budgets/budget-config';
import type { BudgetName, BudgetScope } from './budgets/budget-kinds';
import { loadControlPlaneConfig } from './config/control-plane-config';
import { loadRequestConfig, type RequestConfig } from './requests/request-config';
import { loadResponsesConfig, type ResponsesConfig } from './responses/responses-config';
import { loadSharingConfig, type SharingConfig } from './sharing/sharing-config';
import { loadStorageConfig, type StorageConfig } from './storage/storage-config';
import { loadWebhookConfig, type WebhookConfig } from './webhooks/webhook-config';

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
    sharing: loadSharingConfig(env), batches: loadBatchConfig(env), budgets: loadBudgetLimits(env),
  };
}

/** What a caller (tests, `startServer`) may override; nested concerns field by field. */
export type ControlPlaneOverrides = Partial<Omit<ControlPlaneConfig, 'storage' | 'requests' | 'webhooks' | 'responses' | 'sharing' | 'batches' | 'budgets'>> & {
  storage?: Partial<StorageConfig>;
  requests?: Partial<RequestConfig>;
  webhooks?: Partial<WebhookConfig>;
  responses?: Partial<ResponsesConfig>;
  sharing?: Partial<SharingConfig>;
  batches?: Partial<BatchConfig>;
  /** Some scopes of some budgets; the rest keep their defaults. */
  budgets?: Partial<Record<BudgetName, Partial<Record<BudgetScope, number>>>>;
};
