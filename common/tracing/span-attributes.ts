/**
 * The attribute names our spans carry, in one place (docs/tracing.md lists them). The `gen_ai.*`
 * names are OpenTelemetry's GenAI semantic conventions, so a trace backend's LLM views read
 * them; `http.*`, `url.*` and `server.*` are its HTTP conventions; `inference.*` are ours.
 */
export const ATTR = {
  // GenAI (OpenTelemetry semantic conventions, gen_ai.*)
  operationName: 'gen_ai.operation.name',
  requestModel: 'gen_ai.request.model',
  responseId: 'gen_ai.response.id',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  /** Prompt tokens served from the engine's prefix cache (`usage.prompt_tokens_details.cached_tokens`). */
  cachedTokens: 'gen_ai.usage.cache_read.input_tokens',
  // HTTP (OpenTelemetry semantic conventions)
  httpMethod: 'http.request.method',
  httpRoute: 'http.route',
  httpStatus: 'http.response.status_code',
  urlPath: 'url.path',
  serverAddress: 'server.address',
  errorType: 'error.type',
  // Ours
  requestId: 'inference.request.id',
  workspaceId: 'inference.workspace.id',
  deploymentId: 'inference.deployment.id',
  replicaId: 'inference.replica.id',
  /** A guest's `shared/<model-id>` (shared serving). */
  sharedModel: 'inference.shared_model',
  /**
   * The LoRA adapter a request's `model` named (docs/adapters.md): its id, the client's name and
   * the revision it ran on. `gen_ai.request.model` (and the span's name) stay the deployment's
   * base model, bounded as the metrics' labels are.
   */
  adapterId: 'inference.adapter.id',
  adapterName: 'inference.adapter.name',
  adapterRevision: 'inference.adapter.revision',
  endpoint: 'inference.endpoint',
  stream: 'inference.stream',
  jobId: 'inference.job.id',
  routingPolicy: 'inference.routing.policy',
  routingReason: 'inference.routing.reason',
  /** `per_token` (a guest's request, billed at the shared model's prices) or `gpu_hours` (an owner's: the deployment's replicas are billed by the hour, not the request). */
  costBasis: 'inference.cost.basis',
  /** A per-token request's charge, decimal text in US dollars. */
  costUsd: 'inference.cost.usd',
  batchId: 'inference.batch.id',
  /** An async request record (`req_…`), background response (`resp_…`) or webhook event (`evt_…`). */
  recordId: 'inference.record.id',
  outcome: 'inference.outcome',
  errorCode: 'inference.error.code',
  queued: 'inference.queued',
  engineKind: 'inference.engine.kind',
  webhookEventType: 'inference.webhook.event_type',
  webhookAttempt: 'inference.webhook.attempt',
} as const;

/** `gen_ai.operation.name` of each of our endpoints. */
export const GEN_AI_OPERATIONS: Readonly<Record<string, string>> = {
  'chat.completions': 'chat',
  responses: 'chat',
  completions: 'text_completion',
  embeddings: 'embeddings',
};
