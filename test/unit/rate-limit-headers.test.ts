import { durationString, rateLimitHeaders, refusalRateLimitHeaders } from '../../gateway/http/rate-limit-headers';
import { RateLimitRefusal, requestsPerMinuteExceeded, tokensPerDayExceeded } from '../../control-plane/rate-limits/rate-limit-decision';
import { renderError } from '../../gateway/errors/error-response';

const HOLD = { apiKeyId: 'k', day: 0, tokens: 10, shared: false };

describe('OpenAI rate-limit headers', () => {
  it('formats resets as Go durations, as OpenAI sends them', () => {
    expect(durationString(0)).toBe('0s');
    expect(durationString(1)).toBe('1s');
    expect(durationString(0.02)).toBe('20ms');
    expect(durationString(1.5)).toBe('1.5s');
    expect(durationString(60)).toBe('1m0s');
    expect(durationString(360)).toBe('6m0s');
    expect(durationString(3_661)).toBe('1h1m1s');
    expect(durationString(86_400)).toBe('24h0m0s');
  });

  it('sends both vocabularies on an admitted request', () => {
    const flat = rateLimitHeaders({ remainingRequests: 59, resetRequestsSeconds: 7, remainingTokens: 900, resetTokensSeconds: 47_100, hold: HOLD }, 60, 1_000);
    const headers = Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, index) => [flat[2 * index], flat[2 * index + 1]]));
    expect(headers).toEqual({
      'x-ratelimit-limit': '60', 'x-ratelimit-remaining': '59', 'x-ratelimit-reset': '7',
      'x-ratelimit-limit-requests': '60', 'x-ratelimit-remaining-requests': '59', 'x-ratelimit-reset-requests': '7s',
      'x-ratelimit-limit-tokens': '1000', 'x-ratelimit-remaining-tokens': '900', 'x-ratelimit-reset-tokens': '13h5m0s',
    });
  });

  it('puts the refusing limit at 0 on a 429', () => {
    const rpm = requestsPerMinuteExceeded(60, 6_500);
    expect(rpm).toBeInstanceOf(RateLimitRefusal);
    const rendered = renderError(rpm);
    expect(rendered.status).toBe(429);
    expect(rendered.headers).toMatchObject({
      'retry-after': '7', 'x-ratelimit-limit-requests': '60', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '7s',
    });
    expect(refusalRateLimitHeaders(tokensPerDayExceeded(1_200, 1_000, 360_000) as RateLimitRefusal)).toEqual({
      'x-ratelimit-limit-tokens': '1000', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '6m0s',
    });
  });
});
