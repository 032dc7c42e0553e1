import { AppError } from '../errors/app-error';

/** The request field vLLM and SGLang salt their prefix cache with. */
export const CACHE_SALT_FIELD = 'cache_salt';

const REFUSAL = `${CACHE_SALT_FIELD} is not accepted: the platform salts each workspace's prefix cache with a secret of its own `
  + '(a request reuses cached prompts of its own workspace only), and a request may not choose another';

/**
 * A client's `cache_salt` is refused (400 naming it), present with any value, null included:
 * the engines' prefix caches are keyed by the salt, so a client that picked another tenant's
 * would read that tenant's prompts through `cached_tokens` and timing. The agent sends the
 * workspace's own salt in its place (control-plane/dispatch/cache-salts.ts).
 */
export function refuseCacheSalt(fields: Record<string, unknown>): void {
  if (fields[CACHE_SALT_FIELD] !== undefined) throw new AppError('invalid_request', REFUSAL, { param: CACHE_SALT_FIELD });
}
