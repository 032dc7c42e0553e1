import type { InputContentPart, ResponseItem, ResponsesRequest } from './response-items';

/**
 * The one place a Responses request becomes chat (the rule: engines see chat). The
 * chain's items (every earlier turn's input and output, oldest first) and this turn's input
 * become chat messages in order; `instructions` lead as a system message and are not carried
 * over from earlier turns (OpenAI's rule). Settings map to their chat fields; fields that have
 * no chat meaning (`metadata`, `store`, `truncation`) stay with the response.
 */
export function responsesToChat(request: ResponsesRequest, history: readonly ResponseItem[], model: string): Record<string, unknown> {
  const messages: Record<string, unknown>[] = [];
  if (request.instructions !== null) messages.push({ role: 'system', content: request.instructions });
  messages.push(...itemsToMessages([...history, ...request.input]));
  const chat: Record<string, unknown> = { model, messages };
  if (request.maxOutputTokens !== null) chat.max_tokens = request.maxOutputTokens;
  if (request.temperature !== null) chat.temperature = request.temperature;
  if (request.topP !== null) chat.top_p = request.topP;
  if (request.user !== null) chat.user = request.user;
  if (request.tools.length > 0) {
    chat.tools = request.tools.map((tool) => ({
      type: 'function',
      function: {
        name: tool.name,
        ...(tool.description != null ? { description: tool.description } : {}),
        ...(tool.parameters !== null ? { parameters: tool.parameters } : {}),
        ...(tool.strict !== null ? { strict: tool.strict } : {}),
      },
    }));
    chat.tool_choice = typeof request.toolChoice === 'string' ? request.toolChoice : { type: 'function', function: { name: request.toolChoice.name } };
    // Chat refuses parallel_tool_calls without tools: sent only with them.
    chat.parallel_tool_calls = request.parallelToolCalls;
  } else if (request.toolChoice === 'none') {
    chat.tool_choice = 'none';
  }
  const format = request.text.format;
  if (format.type === 'json_object') chat.response_format = { type: 'json_object' };
  if (format.type === 'json_schema') {
    chat.response_format = {
      type: 'json_schema',
      json_schema: {
        name: format.name, schema: format.schema,
        ...(format.strict !== null ? { strict: format.strict } : {}),
        ...(format.description !== undefined ? { description: format.description } : {}),
      },
    };
  }
  if (request.stream) {
    chat.stream = true;
    // The final event carries usage, and settlement needs it: always asked for.
    chat.stream_options = { include_usage: true };
  }
  return chat;
}

/**
 * Items → chat messages. A `function_call` joins the assistant message just before it (the
 * text and the calls of one chat turn come back as separate items), so a model sees one
 * assistant turn with its `tool_calls`; each `function_call_output` is a `tool` message.
 */
export function itemsToMessages(items: readonly ResponseItem[]): Record<string, unknown>[] {
  const messages: Record<string, unknown>[] = [];
  let assistant: { role: 'assistant'; content: string | null; tool_calls?: unknown[] } | null = null;
  for (const item of items) {
    if (item.type === 'function_call') {
      if (!assistant) {
        assistant = { role: 'assistant', content: null };
        messages.push(assistant);
      }
      (assistant.tool_calls ??= []).push({ id: item.call_id, type: 'function', function: { name: item.name, arguments: item.arguments } });
      continue;
    }
    if (item.type === 'function_call_output') {
      assistant = null;
      messages.push({ role: 'tool', tool_call_id: item.call_id, content: item.output });
      continue;
    }
    if (item.role === 'assistant') {
      assistant = { role: 'assistant', content: partsText(item.content) };
      messages.push(assistant);
      continue;
    }
    assistant = null;
    messages.push({ role: item.role, content: chatContent(item.content) });
  }
  return messages;
}

/** Text alone stays a string (what every engine's template reads); with an image, chat's content parts. */
function chatContent(parts: readonly InputContentPart[]): string | Record<string, unknown>[] {
  if (parts.every((part) => part.type !== 'input_image')) return partsText(parts);
  return parts.map((part) => part.type === 'input_image'
    ? { type: 'image_url', image_url: { url: part.image_url, detail: part.detail } }
    : { type: 'text', text: part.text });
}

function partsText(parts: readonly InputContentPart[]): string {
  let text = '';
  for (const part of parts) if (part.type !== 'input_image') text += part.text;
  return text;
}
