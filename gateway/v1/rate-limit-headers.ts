import type { RateLimitDecision } from '../../control-plane/rate-limits/rate-limit-decision';

/**
 * The contract's `X-RateLimit-Remaining` / `X-RateLimit-Reset` (docs/api-contract.md#rate-limits) describe the RPM window (requests
 * left, seconds until the oldest request leaves it); the `-Tokens` pair describes TPD.
 */
export function rateLimitHeaders(decision: RateLimitDecision, rpmLimit: number, tpdLimit: number): string[] {
  // A flat [name, value, …] list: writeHead takes it as is, without copying an object per response.
  return [
    'x-ratelimit-limit', String(rpmLimit),
    'x-ratelimit-remaining', String(decision.remainingRequests),
    'x-ratelimit-reset', String(decision.resetRequestsSeconds),
    'x-ratelimit-limit-tokens', String(tpdLimit),
    'x-ratelimit-remaining-tokens', String(decision.remainingTokens),
    'x-ratelimit-reset-tokens', String(decision.resetTokensSeconds),
  ];
}
