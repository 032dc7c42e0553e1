import type { CatalogModel } from '../catalog/catalog';
import type { ServiceModel } from './service-model';

/**
 * The figures a model's service model falls back on when the catalog states none
 * (docs/scaling-settings.md#service-model). They are planning assumptions, not measurements:
 * a text request holds its slot about 10 s, the LLM service time `npm run bench:autoscaler`
 * simulates (bench/results/autoscaler-2026-11-22-e53837e.md), split as a 512-token prompt
 * prefilled in 0.1 s and 256 tokens decoded at 25.6 per second; a media job takes the catalog's
 * `jobSeconds`, else the benchmark's 4 s diffusion job; a replica starts in 60 s, the
 * simulator's default. An operator who measured the engine states `service` in the catalog.
 */
export const SERVICE_DEFAULTS = {
  prefillTokensPerSecond: 5_120,
  decodeTokensPerSecond: 25.6,
  meanPromptTokens: 512,
  meanOutputTokens: 256,
  mediaJobSeconds: 4,
  startupMs: 60_000,
} as const;

/** What the deployment's own traffic and engines showed lately (cluster-scaling-signals.ts); null: not measured. */
export interface ObservedService {
  readonly prefixCacheHitRate: number | null;
  readonly meanPromptTokens: number | null;
  readonly meanOutputTokens: number | null;
}

const UNOBSERVED: ObservedService = { prefixCacheHitRate: null, meanPromptTokens: null, meanOutputTokens: null };

/**
 * One replica of `model` as the `slo` policy sizes it: the rates and start-up from the catalog
 * (or the defaults above), the prefix-cache hit rate the engines report, and the mean request
 * the deployment's traffic measured (else the catalog's, else the default). A media job is a
 * request with no prompt and one "output token" that takes the job's seconds, so the same
 * arithmetic (a slot held for prefill + output / decode rate) gives its service time.
 */
export function serviceModelOf(model: CatalogModel, observed: ObservedService = UNOBSERVED): ServiceModel {
  const slots = model.service?.slots ?? model.targetConcurrency;
  const startupMs = model.service?.startupSeconds !== undefined ? model.service.startupSeconds * 1000 : SERVICE_DEFAULTS.startupMs;
  if (model.modality !== 'text') {
    const jobSeconds = model.jobSeconds ?? SERVICE_DEFAULTS.mediaJobSeconds;
    return {
      slots, startupMs, prefixHitRate: 0,
      prefillTokensPerSecond: SERVICE_DEFAULTS.prefillTokensPerSecond, meanPromptTokens: 0,
      decodeTokensPerSecond: 1 / jobSeconds, meanOutputTokens: 1,
    };
  }
  const stated = model.service;
  return {
    slots, startupMs,
    prefillTokensPerSecond: stated?.prefillTokensPerSecond ?? SERVICE_DEFAULTS.prefillTokensPerSecond,
    decodeTokensPerSecond: stated?.decodeTokensPerSecond ?? SERVICE_DEFAULTS.decodeTokensPerSecond,
    prefixHitRate: observed.prefixCacheHitRate ?? 0,
    meanPromptTokens: observed.meanPromptTokens ?? stated?.meanPromptTokens ?? SERVICE_DEFAULTS.meanPromptTokens,
    // Embeddings produce no tokens: the default output is for generating models only.
    meanOutputTokens: observed.meanOutputTokens ?? stated?.meanOutputTokens ?? (model.task === 'embedding' ? 0 : SERVICE_DEFAULTS.meanOutputTokens),
  };
}
