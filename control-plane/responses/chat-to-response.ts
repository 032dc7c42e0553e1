import { parseJsonText } from '../../common/json-nesting';
import { itemId as newId } from './response-ids';
import type { FunctionCallItem, MessageItem, ResponseItem, ResponseStatus, ResponseUsage } from './response-items';

/** What a finished chat answer makes of a response: its output items, status and usage. */
export interface ChatResult {
  output: ResponseItem[];
  status: Extract<ResponseStatus, 'completed' | 'incomplete'>;
  incompleteDetails: { reason: 'max_output_tokens' | 'content_filter' } | null;
  usage: ResponseUsage | null;
}

interface ChatUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  total_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
  completion_tokens_details?: { reasoning_tokens?: number } | null;
}

/** A chat completion (the engine's JSON answer) as Responses output: its text as a message, each tool call as a function_call item. */
export function chatAnswerToResult(answer: Record<string, unknown>): ChatResult {
  const choice = (Array.isArray(answer.choices) ? answer.choices[0] : undefined) as Record<string, unknown> | undefined;
  const message = (choice?.message ?? {}) as { content?: string | null; tool_calls?: { id?: string; function?: { name?: string; arguments?: string } }[] };
  const output: ResponseItem[] = [];
  if (typeof message.content === 'string' && message.content.length > 0) output.push(messageItem(newId('msg'), message.content, 'completed'));
  for (const call of message.tool_calls ?? []) {
    output.push(functionCallItem(newId('fc'), call.id ?? newId('call'), call.function?.name ?? '', call.function?.arguments ?? '', 'completed'));
  }
  if (output.length === 0) output.push(messageItem(newId('msg'), '', 'completed'));
  return { output, ...statusOf(typeof choice?.finish_reason === 'string' ? choice.finish_reason : 'stop'), usage: usageOf(answer.usage as ChatUsage | undefined) };
}

/** finish_reason → status: `length` is `incomplete` (max_output_tokens), `content_filter` too; the rest completed. */
export function statusOf(finishReason: string): Pick<ChatResult, 'status' | 'incompleteDetails'> {
  if (finishReason === 'length') return { status: 'incomplete', incompleteDetails: { reason: 'max_output_tokens' } };
  if (finishReason === 'content_filter') return { status: 'incomplete', incompleteDetails: { reason: 'content_filter' } };
  return { status: 'completed', incompleteDetails: null };
}

export function usageOf(usage: ChatUsage | null | undefined): ResponseUsage | null {
  if (!usage || typeof usage.prompt_tokens !== 'number') return null;
  const input = usage.prompt_tokens;
  const output = usage.completion_tokens ?? 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens ?? input + output,
  };
}

export function messageItem(id: string, text: string, status: MessageItem['status']): MessageItem {
  return { id, type: 'message', role: 'assistant', status, content: [{ type: 'output_text', text, annotations: [] }] };
}

export function functionCallItem(id: string, callId: string, name: string, args: string, status: FunctionCallItem['status']): FunctionCallItem {
  return { id, type: 'function_call', call_id: callId, name, arguments: args, status };
}

/** One typed stream event, before the writer numbers it (`sequence_number`). */
export interface StreamEvent {
  type: string;
  [field: string]: unknown;
}

interface OpenText { kind: 'text'; index: number; id: string; text: string }
interface OpenCall { kind: 'call'; index: number; id: string; toolIndex: number; callId: string; name: string; arguments: string }

/**
 * Turns a chat stream's chunks (`data: {...}` SSE events, split anywhere) into the Responses
 * API's typed events, in OpenAI's order: an item opens (`output_item.added`, and for text
 * `content_part.added`), its deltas follow, and it closes (`.done` events) before the next one
 * opens. The output items it built, the finish reason and the usage chunk are kept for the
 * final `response.completed` / `response.incomplete` and the stored record.
 */
export class ChatStreamTranslator {
  readonly output: ResponseItem[] = [];
  finishReason = 'stop';
  usage: ResponseUsage | null = null;
  /** An `{"error": …}` event the engine sent instead of a chunk. */
  error: { code: string; message: string } | null = null;
  private pending = '';
  private open: OpenText | OpenCall | null = null;

  /** The events the bytes complete; a partial event waits for the rest. */
  push(data: Buffer): StreamEvent[] {
    this.pending += data.toString('utf8');
    const events: StreamEvent[] = [];
    let end: number;
    while ((end = this.pending.indexOf('\n\n')) !== -1) {
      const block = this.pending.slice(0, end);
      this.pending = this.pending.slice(end + 2);
      for (const line of block.split('\n')) {
        if (!line.startsWith('data:')) continue;
        const payload = line.slice(5).trim();
        if (payload === '[DONE]' || payload === '') continue;
        let chunk: Record<string, unknown>;
        try {
          chunk = parseJsonText(payload) as Record<string, unknown>;
        } catch {
          continue;
        }
        this.chunk(chunk, events);
      }
    }
    return events;
  }

  /** Closes what is open; the stream ended (or was cut: the items stay `incomplete`). */
  finish(cut = false): StreamEvent[] {
    const events: StreamEvent[] = [];
    this.close(events, cut ? 'incomplete' : 'completed');
    return events;
  }

  private chunk(chunk: Record<string, unknown>, events: StreamEvent[]): void {
    if (chunk.error && typeof chunk.error === 'object') {
      const error = chunk.error as { code?: unknown; message?: unknown };
      this.error = { code: typeof error.code === 'string' ? error.code : 'upstream_error', message: typeof error.message === 'string' ? error.message : 'the engine failed' };
      return;
    }
    const usage = usageOf(chunk.usage as ChatUsage | undefined);
    if (usage) this.usage = usage;
    const choice = (Array.isArray(chunk.choices) ? chunk.choices[0] : undefined) as { delta?: Record<string, unknown>; finish_reason?: unknown } | undefined;
    if (!choice) return;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string' && delta.content.length > 0) this.text(delta.content, events);
    if (Array.isArray(delta.tool_calls)) for (const call of delta.tool_calls) this.toolCall(call as Record<string, unknown>, events);
    if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason;
  }

  private text(delta: string, events: StreamEvent[]): void {
    if (this.open?.kind !== 'text') {
      this.close(events, 'completed');
      const open: OpenText = { kind: 'text', index: this.output.length, id: newId('msg'), text: '' };
      this.open = open;
      this.output.push(messageItem(open.id, '', 'in_progress'));
      events.push({ type: 'response.output_item.added', output_index: open.index, item: { id: open.id, type: 'message', status: 'in_progress', role: 'assistant', content: [] } });
      events.push({ type: 'response.content_part.added', item_id: open.id, output_index: open.index, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } });
    }
    const open = this.open as OpenText;
    open.text += delta;
    events.push({ type: 'response.output_text.delta', item_id: open.id, output_index: open.index, content_index: 0, delta, logprobs: [] });
  }

  private toolCall(call: Record<string, unknown>, events: StreamEvent[]): void {
    const toolIndex = typeof call.index === 'number' ? call.index : 0;
    const fn = (call.function ?? {}) as { name?: unknown; arguments?: unknown };
    if (this.open?.kind !== 'call' || this.open.toolIndex !== toolIndex) {
      this.close(events, 'completed');
      const open: OpenCall = {
        kind: 'call', index: this.output.length, id: newId('fc'), toolIndex,
        callId: typeof call.id === 'string' ? call.id : newId('call'), name: typeof fn.name === 'string' ? fn.name : '', arguments: '',
      };
      this.open = open;
      this.output.push(functionCallItem(open.id, open.callId, open.name, '', 'in_progress'));
      events.push({ type: 'response.output_item.added', output_index: open.index, item: functionCallItem(open.id, open.callId, open.name, '', 'in_progress') });
    }
    const open = this.open as OpenCall;
    if (typeof fn.arguments === 'string' && fn.arguments.length > 0) {
      open.arguments += fn.arguments;
      events.push({ type: 'response.function_call_arguments.delta', item_id: open.id, output_index: open.index, delta: fn.arguments });
    }
  }

  private close(events: StreamEvent[], status: 'completed' | 'incomplete'): void {
    const open = this.open;
    if (!open) return;
    this.open = null;
    if (open.kind === 'text') {
      const item = messageItem(open.id, open.text, status);
      this.output[open.index] = item;
      events.push({ type: 'response.output_text.done', item_id: open.id, output_index: open.index, content_index: 0, text: open.text, logprobs: [] });
      events.push({ type: 'response.content_part.done', item_id: open.id, output_index: open.index, content_index: 0, part: item.content[0] });
      events.push({ type: 'response.output_item.done', output_index: open.index, item });
      return;
    }
    const item = functionCallItem(open.id, open.callId, open.name, open.arguments, status);
    this.output[open.index] = item;
    events.push({ type: 'response.function_call_arguments.done', item_id: open.id, output_index: open.index, name: open.name, arguments: open.arguments });
    events.push({ type: 'response.output_item.done', output_index: open.index, item });
  }
}
