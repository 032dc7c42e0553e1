/**
 * How many tokens a chat or completions request can produce, decided here and nowhere else:
 * admission's TPD hold and its clamp (admission.ts), a batch line's TPD hold (through
 * `textTokenHold`), and a guest's credit screen and hold (the pipeline hands shared serving the
 * number). They were three computations that disagreed: a guest request without a bound held
 * its key's day for 1,024 completion tokens while its credit hold and its body said
 * `SHARED_DEFAULT_MAX_TOKENS`, and the TPD clamp, lowering from 1,024, could give it a bound
 * above that default.
 */

/**
 * Completion tokens assumed for a request that sets no bound, when holding its tokens against
 * TPD (the engine would otherwise stop only at the context length). One request that runs past
 * it overshoots the day's budget by the rest, once.
 */
export const DEFAULT_COMPLETION_HOLD = 1024;

export interface CompletionBound {
  /** Tokens one completion may produce: `max_completion_tokens`, else `max_tokens`, else the caller's assumption. */
  readonly perChoice: number;
  /** How many completions share that bound: `n` × the prompts of a completions request with a prompt array. */
  readonly completions: number;
  /** `perChoice × completions`: the most the request can produce. */
  readonly total: number;
  /** Whether the request itself sets the bound (else the engine does not know `perChoice`). */
  readonly given: boolean;
  /** The field that bounds it (`max_completion_tokens` wins, as in the engines), where a lower bound is written. */
  readonly field: 'max_completion_tokens' | 'max_tokens';
}

/**
 * The request's completion bound from its fields; `unbounded` is assumed per completion when it
 * sets none (a null bound is none). A value the parse refuses (400) counts as 1: only the
 * screen before the parse meets one (the gateway's scan of the raw body), and it must not answer
 * 402 for what is a 400.
 */
export function completionBound(fields: Record<string, unknown>, unbounded: number = DEFAULT_COMPLETION_HOLD): CompletionBound {
  const field = fields.max_completion_tokens !== undefined && fields.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const value = fields[field];
  const given = value !== undefined && value !== null;
  const perChoice = !given ? unbounded : isCount(value) ? value : 1;
  const choices = isCount(fields.n) ? fields.n : 1;
  const prompts = Array.isArray(fields.prompt) && fields.prompt.length > 0 && typeof fields.prompt[0] === 'string' ? fields.prompt.length : 1;
  const completions = choices * prompts;
  return { perChoice, completions, total: perChoice * completions, given, field };
}

/**
 * The request with a bound the engine keeps to: when it sets none, `max_tokens: limit` is
 * written into its fields and body (a guest's, whose credit hold must bound the cost); else it
 * is returned as it is.
 */
export function withCompletionBound(fields: Record<string, unknown>, body: Buffer, limit: number): { fields: Record<string, unknown>; body: Buffer } {
  if (completionBound(fields).given) return { fields, body };
  const bounded = { ...fields, max_tokens: limit };
  return { fields: bounded, body: Buffer.from(JSON.stringify(bounded)) };
}

function isCount(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 1;
}
