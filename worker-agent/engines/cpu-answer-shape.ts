/**
 * What the CPU engine answers a chat request with: text, JSON (`response_format`), or calls of
 * the request's tools (`tools` + `tool_choice`). It has no weights to decide with, so the
 * decision is a fixed, documented rule (docs/api-contract.md#tools-and-structured-outputs):
 *
 * - `tool_choice` `none`, or no tools: no call.
 * - a named function: a call of it.
 * - `required`: a call, of the tools the last user message names (all of them unless
 *   `parallel_tool_calls` is false, then the first), else of the first tool.
 * - `auto` (the default with tools): as `required` when the last message is the user's; after a
 *   tool result (or an assistant turn) no call, so an agent's loop ends with its final answer.
 *
 * Without a call, `response_format` json_schema / json_object gives JSON, else text; text beside
 * tools is one sentence ending in "stop", as a model's final answer does.
 */
import { isObject } from './engine-request';
import { contentText } from './prompt-text';
import { invalidRequestFailure } from './request-fields';

export interface ToolDefinition {
  readonly name: string;
  /** The function's JSON Schema; undefined: no parameters (`{}` arguments). */
  readonly parameters: unknown;
  /** Its place in `tools`: the field a refusal of its schema names. */
  readonly index: number;
}

export type AnswerShape =
  | { readonly kind: 'text'; readonly sentence: boolean }
  | { readonly kind: 'json'; readonly schema: unknown; readonly param: string }
  | { readonly kind: 'tool_calls'; readonly tools: readonly ToolDefinition[] };

/** json_object's answer: a small object. */
export const JSON_OBJECT_SCHEMA = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'], additionalProperties: false };

export function answerShapeOf(payload: Record<string, unknown>): AnswerShape {
  const tools = toolsOf(payload.tools);
  const choice = payload.tool_choice ?? (tools.length > 0 ? 'auto' : 'none');
  const messages = Array.isArray(payload.messages) ? payload.messages as unknown[] : [];
  const called = calledTools(choice, tools, messages, payload.parallel_tool_calls !== false);
  if (called.length > 0) return { kind: 'tool_calls', tools: called };
  const format = payload.response_format;
  if (isObject(format) && format.type === 'json_schema' && isObject(format.json_schema)) {
    return { kind: 'json', schema: format.json_schema.schema, param: 'response_format.json_schema.schema' };
  }
  if (isObject(format) && format.type === 'json_object') return { kind: 'json', schema: JSON_OBJECT_SCHEMA, param: 'response_format' };
  return { kind: 'text', sentence: tools.length > 0 };
}

function toolsOf(tools: unknown): ToolDefinition[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalidRequestFailure('tools', '`tools` must be an array of function tools');
  return tools.map((tool, index) => {
    const definition = isObject(tool) && tool.type === 'function' && isObject(tool.function) ? tool.function : undefined;
    if (!definition || typeof definition.name !== 'string') throw invalidRequestFailure(`tools[${index}]`, 'each tool must be {"type": "function", "function": {"name": ...}}');
    return { name: definition.name, parameters: definition.parameters ?? undefined, index };
  });
}

function calledTools(choice: unknown, tools: readonly ToolDefinition[], messages: readonly unknown[], parallel: boolean): ToolDefinition[] {
  if (tools.length === 0 || choice === 'none') return [];
  if (isObject(choice)) {
    const name = isObject(choice.function) ? choice.function.name : undefined;
    const named = tools.find((tool) => tool.name === name);
    if (!named) throw invalidRequestFailure('tool_choice.function.name', '`tool_choice` must name one of the request\'s tools');
    return [named];
  }
  if (choice === 'auto' && roleOf(messages[messages.length - 1]) !== 'user') return [];
  if (choice !== 'auto' && choice !== 'required') throw invalidRequestFailure('tool_choice', '`tool_choice` must be "none", "auto", "required" or a named function');
  const lastUser = [...messages].reverse().find((message) => roleOf(message) === 'user');
  const text = contentText((lastUser as { content?: unknown } | undefined)?.content).toLowerCase();
  const mentioned = tools.filter((tool) => text.includes(tool.name.toLowerCase()));
  if (mentioned.length === 0) return [tools[0]];
  return parallel ? mentioned : [mentioned[0]];
}

function roleOf(message: unknown): unknown {
  return isObject(message) ? message.role : undefined;
}
