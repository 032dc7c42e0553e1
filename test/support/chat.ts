/**
 * One chat/completions request over plain HTTP, as the integration tests send it: to a /v1 base
 * URL (a deployment's `<server>/d/<slug>/v1`, the workspace's `<server>/v1`) with a key. The SDK
 * is for tests of what the SDK sees; these are for statuses, headers, raw bodies and streams.
 */
import type OpenAI from 'openai';

/** A chat/completions body of one user message, with `fields` beside it (max_tokens, stream, cpu_engine…). */
export function userChat(content: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { messages: [{ role: 'user', content }], ...fields };
}

/** The body most tests send: "hi", two tokens back. */
export const SHORT_CHAT = userChat('hi', { max_tokens: 2 });

export interface ChatOptions {
  /** Headers besides authorization and content-type (x-request-id…). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
}

/** POST `<baseUrl>/chat/completions` as `apiKey`; the response unread (streams, and tests that read it themselves). */
export function postChat(baseUrl: string, apiKey: string, body: unknown = SHORT_CHAT, options: ChatOptions = {}): Promise<Response> {
  return fetch(`${baseUrl}/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...options.headers },
    body: JSON.stringify(body),
    signal: options.signal,
  });
}

export interface ChatAnswer {
  status: number;
  headers: Headers;
  /** The body parsed as JSON (the text itself when it is not JSON). */
  body: any;
}

/** postChat, read to the end. */
export async function chatOnce(baseUrl: string, apiKey: string, body: unknown = SHORT_CHAT, options: ChatOptions = {}): Promise<ChatAnswer> {
  const response = await postChat(baseUrl, apiKey, body, options);
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: the text is the body.
  }
  return { status: response.status, headers: response.headers, body: parsed };
}

/** A streamed /v1/completions (the SDK's) read to its end: each choice's text, by index, and the usage chunk's usage. */
export async function readCompletionStream(stream: AsyncIterable<OpenAI.Completion>, choices: number): Promise<{ texts: string[]; usage: OpenAI.CompletionUsage | undefined }> {
  const texts = Array.from({ length: choices }, () => '');
  let usage: OpenAI.CompletionUsage | undefined;
  for await (const chunk of stream) {
    for (const choice of chunk.choices) texts[choice.index] += choice.text;
    if (chunk.usage) usage = chunk.usage;
  }
  return { texts, usage };
}
