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

/** Reads an OpenAI `usage` object; undefined when absent or malformed. */
export function usageFromOpenAi(value: unknown): Usage | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const usage = value as Record<string, unknown>;
  const promptTokens = usage.prompt_tokens;
  // Embedding answers count prompt tokens only.
  const completionTokens = usage.completion_tokens === undefined && typeof promptTokens === 'number' ? 0 : usage.completion_tokens;
  if (typeof promptTokens !== 'number' || typeof completionTokens !== 'number') return undefined;
  const totalTokens = typeof usage.total_tokens === 'number' ? usage.total_tokens : promptTokens + completionTokens;
  return { promptTokens, completionTokens, totalTokens };
}
