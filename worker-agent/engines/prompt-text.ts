import type { EngineRoutePath } from './engine-request';

/**
 * The text a request asks the model to continue: chat message contents (strings and text
 * parts) or the completion prompt, joined by newlines so words of adjacent messages never
 * merge; for embeddings, the input strings. Used by the CPU engine to count tokens and by adapters to estimate missing usage.
 */
export function promptTextOf(payload: Record<string, unknown>, path: EngineRoutePath): string {
  if (path === '/v1/chat/completions') {
    const messages = Array.isArray(payload.messages) ? payload.messages : [];
    return messages.map((message) => contentText((message as { content?: unknown } | null)?.content)).join('\n');
  }
  const prompt = path === '/v1/embeddings' ? payload.input : payload.prompt;
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt)) return prompt.filter((part) => typeof part === 'string').join('\n');
  return '';
}

/** A message's text: a string content, or its text parts joined by newlines. */
export function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .filter((part) => part?.type === 'text' && typeof part.text === 'string')
    .map((part) => part.text as string)
    .join('\n');
}
