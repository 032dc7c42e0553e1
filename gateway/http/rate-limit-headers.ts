import { type RateLimitDecision, RateLimitRefusal } from '../../control-plane/api/errors';

/**
 * The rate-limit headers of an admitted request, as a flat [name, value, …] list (writeHead
 * takes it as is, without copying an object per response).
 *
 * Two vocabularies side by side. Ours, the contract's (docs/api-contract.md#rate-limits):
 * `X-RateLimit-Limit` / `-Remaining` / `-Reset` describe the RPM window in plain numbers (requests
 * left, seconds until the oldest request leaves it). OpenAI's, which LiteLLM's router, the SDKs'
 * retry helpers and dashboards read: `x-ratelimit-{limit,remaining,reset}-requests` (the same
 * RPM window) and `-tokens` (here the key's tokens per day: we have no per-minute token limit),
 * the resets as OpenAI's duration strings (`1s`, `6m0s`). The `-tokens` names were ours before
 * they were OpenAI's; their reset now takes OpenAI's format, as a client reading those names expects.
 */
export function rateLimitHeaders(decision: RateLimitDecision, rpmLimit: number, tpdLimit: number): string[] {
  return [
    'x-ratelimit-limit', String(rpmLimit),
    'x-ratelimit-remaining', String(decision.remainingRequests),
    'x-ratelimit-reset', String(decision.resetRequestsSeconds),
    'x-ratelimit-limit-requests', String(rpmLimit),
    'x-ratelimit-remaining-requests', String(decision.remainingRequests),
    'x-ratelimit-reset-requests', durationString(decision.resetRequestsSeconds),
    'x-ratelimit-limit-tokens', String(tpdLimit),
    'x-ratelimit-remaining-tokens', String(decision.remainingTokens),
    'x-ratelimit-reset-tokens', durationString(decision.resetTokensSeconds),
  ];
}

/**
 * The headers of a 429 that a rate limit refused: the limit that refused it at 0 and when it
 * frees up. The other limit's state is not known without counting (the refusal stopped first),
 * so its headers are left out rather than guessed.
 */
export function refusalRateLimitHeaders(refusal: RateLimitRefusal): Record<string, string> {
  const reset = durationString(refusal.resetSeconds);
  if (refusal.limit === 'requests') {
    return {
      'x-ratelimit-limit': String(refusal.limitValue), 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String(refusal.resetSeconds),
      'x-ratelimit-limit-requests': String(refusal.limitValue), 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': reset,
    };
  }
  return { 'x-ratelimit-limit-tokens': String(refusal.limitValue), 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': reset };
}

/**
 * Seconds as OpenAI's reset durations, which are Go's `time.Duration` strings: `0s`, `1s`,
 * `1.5s`, `6m0s`, `13h5m0s` (hours are not folded into days).
 */
export function durationString(seconds: number): string {
  const totalMs = Math.max(0, Math.round(seconds * 1000));
  if (totalMs < 1000 && totalMs > 0) return `${totalMs}ms`;
  const hours = Math.floor(totalMs / 3_600_000);
  const minutes = Math.floor((totalMs % 3_600_000) / 60_000);
  const restMs = totalMs % 60_000;
  const secondsText = `${restMs % 1000 === 0 ? restMs / 1000 : (restMs / 1000).toString()}s`;
  if (hours > 0) return `${hours}h${minutes}m${secondsText}`;
  if (minutes > 0) return `${minutes}m${secondsText}`;
  return secondsText;
}
