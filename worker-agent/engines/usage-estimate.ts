import type { Usage } from '../../proto/worker/v1/index';

/**
 * Some engines (older llama.cpp and TGI builds) report no usage at all. Billing must not see
 * a free request, so the agent estimates: about four characters per prompt token, which is
 * the usual rule of thumb for English BPE vocabularies, and one completion token per content
 * chunk for streams (engines emit one chunk per decoded token) or chars/4 for whole bodies.
 */
export function estimateUsage(promptText: string, completionTokens: number): Usage {
  const promptTokens = Math.ceil(promptText.length / 4);
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
}

export function estimateTokensOfText(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * Reads an OpenAI `usage` object; undefined when absent or malformed. Its
 * `prompt_tokens_details.cached_tokens` (vLLM and SGLang with prefix caching, our llama.cpp
 * engine) becomes `cachedTokens`; an engine that does not report it leaves it out.
 */
export function usageFromOpenAi(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const promptTokens = usage.prompt_tokens;
  // Embedding answers count prompt tokens only.
  const completionTokens = usage.completion_tokens === undefined && typeof promptTokens === 'number' ? 0 : usage.completion_tokens;
  if (typeof promptTokens !== 'number' || typeof completionTokens !== 'number') return undefined;
  const totalTokens = typeof usage.total_tokens === 'number' ? usage.total_tokens : promptTokens + completionTokens;
  const cachedTokens = cachedTokensOf(usage.prompt_tokens_details, promptTokens);
  return cachedTokens === undefined ? { promptTokens, completionTokens, totalTokens } : { promptTokens, completionTokens, totalTokens, cachedTokens };
}

/** `prompt_tokens_details.cached_tokens` when it is a count the prompt can hold; undefined when absent (or 0) or nonsense. */
function cachedTokensOf(details: unknown, promptTokens: number): number | undefined {
  if (typeof details !== 'object' || details === null) return undefined;
  const cached = (details as { cached_tokens?: unknown }).cached_tokens;
  if (typeof cached !== 'number' || !Number.isInteger(cached) || cached <= 0) return undefined;
  // An engine cannot have served more of the prompt from cache than the prompt has.
  return Math.min(cached, promptTokens);
}
