/**
 * What one replica of a deployment can do, as the `slo` policy, the simulator and the oracle see
 * it (issue 39): continuous batching with `slots` sequences at once; a request first prefills its
 * prompt (the part not already in the prefix cache) at `prefillTokensPerSecond`, which is its
 * time to first token once it has a slot, then decodes `outputTokens` at `decodeTokensPerSecond`
 * per sequence, holding its slot until done. Calibrated from the engines (docs/autoscaling.md).
 */
export interface ServiceModel {
  /** Sequences one replica runs at once (the engine's batch slots). */
  readonly slots: number;
  /** Prompt tokens per second one replica prefills. */
  readonly prefillTokensPerSecond: number;
  /** Output tokens per second per sequence at full batch. */
  readonly decodeTokensPerSecond: number;
  /** Share of prompt tokens served from the prefix cache (0–1). */
  readonly prefixHitRate: number;
  /** Mean prompt and output tokens of the deployment's requests (a request without lengths uses these). */
  readonly meanPromptTokens: number;
  readonly meanOutputTokens: number;
  /** From ordering a replica to its first request, ms. */
  readonly startupMs: number;
}

/** A request's time to first token once it has a slot: its uncached prompt at the prefill rate, ms. */
export function prefillMs(model: ServiceModel, promptTokens: number): number {
  return (1000 * promptTokens * (1 - model.prefixHitRate)) / model.prefillTokensPerSecond;
}

/** How long a request holds its slot: prefill, then its output at the per-sequence decode rate, ms. */
export function slotHoldMs(model: ServiceModel, promptTokens: number, outputTokens: number): number {
  return prefillMs(model, promptTokens) + (1000 * outputTokens) / model.decodeTokensPerSecond;
}

/** The mean request's slot hold, ms: what one slot serves per second is its inverse. */
export function meanSlotHoldMs(model: ServiceModel): number {
  return slotHoldMs(model, model.meanPromptTokens, model.meanOutputTokens);
}
