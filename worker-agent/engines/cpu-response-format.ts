/**
 * The CPU engine's wire format: `chat.completion` / `text_completion` bodies and their
 * streamed `chat.completion.chunk` / `text_completion` events, field for field as OpenAI
 * and vLLM emit them. Chunks are templated so a token costs one small string build.
 */
import type { CpuCompletionPlan } from './cpu-request';
import type { ChoiceAnswer } from './cpu-choice-request';

export const DONE_EVENT = 'data: [DONE]\n\n';

export interface OpenAiUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

/** `cachedTokens` only with the simulated prefix cache (cpu-prefix-cache.ts): without it the usage has no details, as before. */
export function usageOf(plan: CpuCompletionPlan, completionTokens: number, cachedTokens?: number): OpenAiUsage {
  const usage: OpenAiUsage = { prompt_tokens: plan.promptTokens, completion_tokens: completionTokens, total_tokens: plan.promptTokens + completionTokens };
  if (cachedTokens !== undefined) usage.prompt_tokens_details = { cached_tokens: cachedTokens };
  return usage;
}

export function renderCompletionBody(plan: CpuCompletionPlan, answers: readonly ChoiceAnswer[], usage: OpenAiUsage): Buffer {
  const choices = answers.map((choice, index) => (plan.kind === 'chat'
    ? { index, message: messageOf(choice), logprobs: choice.logprobs ? { content: choice.logprobs, refusal: null } : null, finish_reason: choice.finishReason }
    : { index, text: choice.text, logprobs: null, finish_reason: choice.finishReason }));
  const object = plan.kind === 'chat' ? 'chat.completion' : 'text_completion';
  return Buffer.from(JSON.stringify({ id: plan.id, object, created: plan.created, model: plan.model, choices, usage }));
}

function messageOf(choice: ChoiceAnswer): Record<string, unknown> {
  if (!choice.toolCalls) return { role: 'assistant', content: choice.text, refusal: null };
  const toolCalls = choice.toolCalls.map((call) => ({ id: call.id, type: 'function', function: { name: call.name, arguments: call.arguments } }));
  return { role: 'assistant', content: null, refusal: null, tool_calls: toolCalls };
}

export interface ChunkFormat {
  /** Chat only: the first delta of a choice, `{role: 'assistant', content: ''}` (content null before tool calls). */
  role(index: number, toolCalls: boolean): string;
  /** `logprobs`: the chunk's rendered `logprobs` object, when the request asked for them. */
  content(index: number, piece: string, logprobs?: string): string;
  /** A tool call's first delta: its index, id, type, name and empty arguments. */
  toolCallStart(index: number, call: number, id: string, name: string): string;
  toolCallArguments(index: number, call: number, piece: string): string;
  finish(index: number, finishReason: string): string;
  /** The usage-only chunk (`choices: []`) sent before `[DONE]` when include_usage is set. */
  usage(usage: OpenAiUsage): string;
}

export function chunkFormat(plan: CpuCompletionPlan): ChunkFormat {
  const object = plan.kind === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  const head = `data: {"id":"${plan.id}","object":"${object}","created":${plan.created},"model":${JSON.stringify(plan.model)},"choices":[`;
  // OpenAI sends `"usage":null` on every chunk once the client asked for usage.
  const tail = plan.includeUsage ? '],"usage":null}\n\n' : ']}\n\n';
  const event = (index: number, body: string, finishReason: string | null, logprobs = 'null') =>
    `${head}{"index":${index},${body},"logprobs":${logprobs},"finish_reason":${finishReason === null ? 'null' : `"${finishReason}"`}}${tail}`;
  if (plan.kind === 'chat') {
    return {
      role: (index, toolCalls) => event(index, toolCalls ? '"delta":{"role":"assistant","content":null}' : '"delta":{"role":"assistant","content":""}', null),
      content: (index, piece, logprobs) => event(index, `"delta":{"content":${JSON.stringify(piece)}}`, null, logprobs),
      toolCallStart: (index, call, id, name) =>
        event(index, `"delta":{"tool_calls":[{"index":${call},"id":"${id}","type":"function","function":{"name":${JSON.stringify(name)},"arguments":""}}]}`, null),
      toolCallArguments: (index, call, piece) => event(index, `"delta":{"tool_calls":[{"index":${call},"function":{"arguments":${JSON.stringify(piece)}}}]}`, null),
      finish: (index, finishReason) => event(index, '"delta":{}', finishReason),
      usage: (usage) => `${head}],"usage":${JSON.stringify(usage)}}\n\n`,
    };
  }
  return {
    role: () => '',
    content: (index, piece) => event(index, `"text":${JSON.stringify(piece)}`, null),
    toolCallStart: () => '',
    toolCallArguments: () => '',
    finish: (index, finishReason) => event(index, '"text":""', finishReason),
    usage: (usage) => `${head}],"usage":${JSON.stringify(usage)}}\n\n`,
  };
}
