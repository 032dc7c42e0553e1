/**
 * The llama.cpp engine's wire format: `chat.completion` / `text_completion` bodies and their
 * streamed chunks, field for field as OpenAI and vLLM emit them, so the agent forwards them
 * through the same SSE filter as an HTTP engine's bytes.
 */
import type { LlamaRequestPlan } from './llama-request';
import type { ToolCall } from './llama-tools';

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** OpenAI's shape: prompt tokens that were served from the prefix cache, not evaluated again. */
  prompt_tokens_details?: { cached_tokens: number };
}

export interface FinishedChoice {
  readonly text: string;
  readonly finishReason: 'stop' | 'length' | 'tool_calls';
  /** The answer is these calls (`content` null), not `text`. */
  readonly toolCalls?: readonly ToolCall[];
}

export const DONE_EVENT = 'data: [DONE]\n\n';

export function completionBody(plan: LlamaRequestPlan, choices: readonly FinishedChoice[], usage: OpenAiUsage): Buffer {
  const rendered = choices.map((choice, index) => (plan.kind === 'chat'
    ? { index, message: chatMessage(choice), logprobs: null, finish_reason: choice.finishReason }
    : { index, text: choice.text, logprobs: null, finish_reason: choice.finishReason }));
  const object = plan.kind === 'chat' ? 'chat.completion' : 'text_completion';
  return Buffer.from(JSON.stringify({ id: plan.id, object, created: plan.created, model: plan.model, choices: rendered, usage }));
}

function chatMessage(choice: FinishedChoice) {
  if (choice.toolCalls) return { role: 'assistant', content: null, tool_calls: choice.toolCalls };
  return { role: 'assistant', content: choice.text };
}

export interface ChunkFormat {
  /** Chat: the first delta of a choice (`role`); completions: nothing. */
  start(index: number): string;
  content(index: number, text: string): string;
  /** Chat: a call's first chunk: its index, id, type, name and empty arguments, as OpenAI streams it. */
  toolCallStart(index: number, position: number, id: string, name: string): string;
  /** Chat: the next fragment of a call's arguments. */
  toolCallArguments(index: number, position: number, text: string): string;
  finish(index: number, finishReason: string): string;
  /** The usage-only chunk (`choices: []`) before `[DONE]`. */
  usage(usage: OpenAiUsage): string;
}

export function chunkFormat(plan: LlamaRequestPlan): ChunkFormat {
  const object = plan.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const head = `data: {"id":"${plan.id}","object":"${object}","created":${plan.created},"model":${JSON.stringify(plan.model)},"choices":[`;
  // OpenAI sends `"usage":null` on every chunk once the client asked for usage.
  const tail = plan.includeUsage ? '],"usage":null}\n\n' : ']}\n\n';
  const event = (index: number, body: string, finishReason: string | null) =>
    `${head}{"index":${index},${body},"logprobs":null,"finish_reason":${finishReason === null ? 'null' : JSON.stringify(finishReason)}}${tail}`;
  const usage = (value: OpenAiUsage) => `${head}],"usage":${JSON.stringify(value)}}\n\n`;
  if (plan.kind === 'chat') {
    return {
      // With tools the answer may be calls, whose message content is null.
      start: (index) => event(index, `"delta":{"role":"assistant","content":${plan.output.kind === 'tools' ? 'null' : '""'}}`, null),
      content: (index, text) => event(index, `"delta":{"content":${JSON.stringify(text)}}`, null),
      toolCallStart: (index, position, id, name) =>
        event(index, `"delta":{"tool_calls":[{"index":${position},"id":"${id}","type":"function","function":{"name":${JSON.stringify(name)},"arguments":""}}]}`, null),
      toolCallArguments: (index, position, text) =>
        event(index, `"delta":{"tool_calls":[{"index":${position},"function":{"arguments":${JSON.stringify(text)}}}]}`, null),
      finish: (index, finishReason) => event(index, '"delta":{}', finishReason),
      usage,
    };
  }
  return {
    start: () => '',
    content: (index, text) => event(index, `"text":${JSON.stringify(text)}`, null),
    toolCallStart: () => '',
    toolCallArguments: () => '',
    finish: (index, finishReason) => event(index, '"text":""', finishReason),
    usage,
  };
}
