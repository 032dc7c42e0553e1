/**
 * Function calling on the llama.cpp engine. The model sees the tools in its system prompt and,
 * when it calls them, answers with one JSON array of calls, `[{"name": …, "arguments": {…}}]`;
 * a grammar (llama-grammar.ts) holds it to that shape, each call's arguments to its tool's
 * parameters schema:
 * - `required`: at least one call, of any of the tools;
 * - a named function: calls of that function only;
 * - `auto` (the default with tools): the array of calls, or a plain-text answer, which then
 *   cannot start with `[` (an answer starting with `[` is read as calls);
 * - `none`: no tools in the prompt and no grammar (earlier turns still show their calls).
 * `parallel_tool_calls: false` allows exactly one call. The calls go back in OpenAI's shape
 * (`message.tool_calls`, finish_reason `tool_calls`). One format for every model keeps the
 * grammar and the parser one thing; a model trained on another tool-call syntax still follows
 * it, since the grammar leaves it no other way to call.
 */
import { randomBytes } from 'node:crypto';
import type { GbnfJsonSchema } from 'node-llama-cpp';
import { parseJsonText } from '../../common/json-nesting';
import { isObject } from '../engines/engine-request';
import { invalidRequestFailure } from '../engines/request-fields';
import { toGrammarSchema, type GrammarSchema } from './grammar-schema';

const MAX_TOOLS = 128;
const FUNCTION_NAME = /^[a-zA-Z0-9_-]{1,64}$/;

export interface ToolDefinition {
  readonly name: string;
  readonly description: string;
  /** As the client sent it (shown to the model). */
  readonly parameters: Record<string, unknown>;
}

export interface ToolPlan {
  readonly tools: readonly ToolDefinition[];
  readonly choice: 'auto' | 'required' | { readonly name: string };
  readonly parallel: boolean;
  /** The array of calls the grammar allows. */
  readonly schema: GrammarSchema;
}

export interface ToolCall {
  readonly id: string;
  readonly type: 'function';
  readonly function: { readonly name: string; readonly arguments: string };
}

/** Reads `tools`, `tool_choice` and `parallel_tool_calls`; undefined when no tool may be called. */
export function planTools(payload: Record<string, unknown>): ToolPlan | undefined {
  const tools = toolDefinitions(payload.tools);
  const choice = toolChoice(payload.tool_choice, tools);
  if (choice === 'none' || tools.length === 0) return undefined;
  const parallel = payload.parallel_tool_calls ?? true;
  if (typeof parallel !== 'boolean') throw invalidRequestFailure('parallel_tool_calls', '`parallel_tool_calls` must be a boolean');
  const callable = typeof choice === 'object' ? tools.filter((tool) => tool.name === choice.name) : tools;
  const definitions: Record<string, GbnfJsonSchema> = {};
  const calls = callable.map((tool) => {
    const index = tools.indexOf(tool);
    const { $defs, ...parameters } = toGrammarSchema(tool.parameters, `tools[${index}].function.parameters`, `t${index}_`);
    Object.assign(definitions, $defs);
    return {
      type: 'object', properties: { name: { const: tool.name }, arguments: parameters as GbnfJsonSchema }, additionalProperties: false,
    } as GbnfJsonSchema;
  });
  const item = calls.length === 1 ? calls[0] : { oneOf: calls };
  const schema = {
    type: 'array', items: item, minItems: 1, ...(parallel ? {} : { maxItems: 1 }),
    ...(Object.keys(definitions).length > 0 ? { $defs: definitions } : {}),
  } as GrammarSchema;
  return { tools, choice, parallel, schema };
}

/** The system prompt part that presents the tools and how to call them. */
export function toolPrompt(plan: ToolPlan): string {
  const listed = plan.tools.map((tool) => JSON.stringify({ name: tool.name, description: tool.description, parameters: tool.parameters }));
  const rule = typeof plan.choice === 'object' ? `You must call the function ${plan.choice.name}.`
    : plan.choice === 'required' ? 'You must call at least one function.'
      : 'Call functions only when they help; otherwise answer in plain text.';
  const shape = plan.parallel ? '[{"name": "<function name>", "arguments": {<arguments>}}, …]' : '[{"name": "<function name>", "arguments": {<arguments>}}] (one call at a time)';
  return `# Tools\n\nYou can call these functions:\n${listed.join('\n')}\n\n${rule} To call functions, answer with only a JSON array of calls: ${shape}.`;
}

/** The calls in a finished answer the grammar held to the calls' shape; null when it is a plain-text answer. */
export function parseToolCalls(text: string): ToolCall[] | null {
  if (!text.startsWith('[')) return null;
  const calls = parseJsonText(text) as Array<{ name: string; arguments: unknown }>;
  return calls.map((call) => ({ id: toolCallId(), type: 'function', function: { name: call.name, arguments: JSON.stringify(call.arguments) } }));
}

/** How an earlier assistant turn's calls appear in the prompt: as the model was asked to write them. */
export function renderToolCalls(calls: ReadonlyArray<{ name: string; arguments: string }>): string {
  return JSON.stringify(calls.map((call) => ({ name: call.name, arguments: parsedOrText(call.arguments) })));
}

/** A client's earlier `arguments` text: tenant data, so through the nesting scan; text that is not JSON (or nests too deep) stays text. */
function parsedOrText(text: string): unknown {
  try {
    return parseJsonText(text);
  } catch {
    return text;
  }
}

export function toolCallId(): string {
  return `call_${randomBytes(12).toString('hex')}`;
}

function toolDefinitions(value: unknown): ToolDefinition[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw invalidRequestFailure('tools', '`tools` must be an array of function tools');
  if (value.length > MAX_TOOLS) throw invalidRequestFailure('tools', `\`tools\` takes at most ${MAX_TOOLS} tools`);
  const names = new Set<string>();
  return value.map((tool, index) => {
    const param = `tools[${index}]`;
    if (!isObject(tool) || tool.type !== 'function' || !isObject(tool.function)) {
      throw invalidRequestFailure(`${param}.type`, 'only tools of type `function` (`{"type": "function", "function": {...}}`) are supported by the llama-cpp engine', 'unsupported_parameter');
    }
    const { name, description, parameters } = tool.function;
    if (typeof name !== 'string' || !FUNCTION_NAME.test(name)) {
      throw invalidRequestFailure(`${param}.function.name`, '`name` must be 1-64 letters, digits, underscores or dashes');
    }
    if (names.has(name)) throw invalidRequestFailure(`${param}.function.name`, `two tools are named \`${name}\``);
    names.add(name);
    if (description !== undefined && typeof description !== 'string') throw invalidRequestFailure(`${param}.function.description`, '`description` must be a string');
    if (parameters !== undefined && !isObject(parameters)) throw invalidRequestFailure(`${param}.function.parameters`, '`parameters` must be a JSON Schema object');
    // OpenAI: omitted parameters means a function without arguments.
    return { name, description: description ?? '', parameters: parameters ?? { type: 'object', properties: {} } };
  });
}

function toolChoice(value: unknown, tools: readonly ToolDefinition[]): ToolPlan['choice'] | 'none' {
  if (value === undefined || value === null) return 'auto';
  if (value === 'none' || value === 'auto' || value === 'required') {
    if (value === 'required' && tools.length === 0) throw invalidRequestFailure('tool_choice', '`tool_choice: "required"` needs `tools`');
    return value;
  }
  const name = isObject(value) && value.type === 'function' && isObject(value.function) ? value.function.name : undefined;
  if (typeof name !== 'string') {
    throw invalidRequestFailure('tool_choice', '`tool_choice` must be "none", "auto", "required" or {"type": "function", "function": {"name": "..."}}');
  }
  if (!tools.some((tool) => tool.name === name)) throw invalidRequestFailure('tool_choice', `\`tool_choice\` names \`${name}\`, which is not among \`tools\``);
  return { name };
}
