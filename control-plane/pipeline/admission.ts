import type { AuthenticatedKey } from '../api-keys/api-key.service';
import { AppError } from '../errors/app-error';

/**
 * Admission rules every kind of work shares, decided here once so that no endpoint can forget
 * one: a workspace whose prepaid credit is used up was refused on chat but accepted on images
 * (a 202 and a GPU run paid by nobody) while each route kept its own copy of the check.
 */

/** 402 `insufficient_quota` before anything runs, on every endpoint that spends. */
export function refuseWithoutCredit(key: Pick<AuthenticatedKey, 'creditExhausted'>): void {
  if (key.creditExhausted) throw new AppError('insufficient_quota', 'the workspace has no credit left; add credit to continue');
}

/**
 * Completion tokens assumed for a request that sets no bound, when holding its tokens against
 * TPD (the engine would otherwise stop only at the context length). One request that runs past
 * it overshoots the day's budget by the rest, once.
 */
export const DEFAULT_COMPLETION_HOLD = 1024;

/**
 * The most tokens a text request may use, held against its key's TPD from admission until it
 * is settled to its real usage: its body's bytes (no prompt has more tokens than bytes) plus its
 * completion bound (`max_completion_tokens` or `max_tokens`, else the default) times `n`, times
 * the prompts of a completions request with a prompt array.
 */
export function textTokenHold(bodyBytes: number, fields: Record<string, unknown>): number {
  const given = fields.max_completion_tokens ?? fields.max_tokens;
  const perChoice = typeof given === 'number' && Number.isFinite(given) && given >= 0 ? given : DEFAULT_COMPLETION_HOLD;
  const choices = typeof fields.n === 'number' && fields.n >= 1 ? fields.n : 1;
  const prompts = Array.isArray(fields.prompt) && fields.prompt.length > 0 && typeof fields.prompt[0] === 'string' ? fields.prompt.length : 1;
  return bodyBytes + perChoice * choices * prompts;
}
