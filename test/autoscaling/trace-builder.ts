import type { RequestTrace } from '../../control-plane/autoscaling/load-traces';
import type { ServiceModel } from '../../control-plane/autoscaling/service-model';

/** A trace written out by hand: [arrival ms, prompt tokens, output tokens] per request. */
export function handTrace(seconds: number, requests: Array<[number, number, number]>): RequestTrace {
  return {
    name: 'hand', seconds,
    arrivalMs: Float64Array.from(requests.map(([at]) => at)),
    promptTokens: Uint32Array.from(requests.map(([, prompt]) => prompt)),
    outputTokens: Uint32Array.from(requests.map(([, , output]) => output)),
  };
}

/**
 * Round numbers: a slot holds a request for its prompt at 1,000 tokens/s (no prefix hits)
 * plus its output at 1 token/s, so [0, 500, 5] prefills in 0.5 s and holds its slot 5.5 s.
 */
export function handModel(overrides: Partial<ServiceModel> = {}): ServiceModel {
  return {
    slots: 1, prefillTokensPerSecond: 1_000, decodeTokensPerSecond: 1, prefixHitRate: 0,
    meanPromptTokens: 0, meanOutputTokens: 5, startupMs: 3_000, ...overrides,
  };
}
