/**
 * Tools, tool choice, structured outputs and logprobs of a chat request, checked before a job
 * is sent, so a bad one is a 400 naming the exact field (`tools[0].function.name`) on every engine,
 * never an engine's raw error or, worse, a 200 that ignored it. Each check takes the field's
 * path, so `/v1/responses`, whose tools and formats are flat (`tools[0].name`,
 * `text.format.schema`), reuses them under its own paths.
 */
import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import { checkJsonSchema, formatPath } from '../../common/json-schema';

export const TOOL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;
export const MAX_TOOLS = 128;
export const MAX_TOP_LOGPROBS = 20;

type Fields = Record<string, unknown>;

/** Chat's `tools`, `tool_choice`, `parallel_tool_calls`, `response_format`, `logprobs` and `top_logprobs`. */
export function checkChatToolFields(fields: Fields): void {
  const toolNames = fields.tools === undefined || fields.tools === null ? null : checkChatTools(fields.tools, 'tools');
  checkChatToolChoice(fields.tool_choice, toolNames, 'tool_choice');
  checkBoolean(fields.parallel_tool_calls, 'parallel_tool_calls');
  checkChatResponseFormat(fields.response_format, 'response_format');
  checkLogprobs(fields.logprobs, fields.top_logprobs, 'logprobs', 'top_logprobs');
}

/** `[{type: "function", function: {...}}]`; returns the tools' names in order. */
export function checkChatTools(tools: unknown, param: string): string[] {
  if (!Array.isArray(tools)) throw invalid(`${param} must be an array of tools like {"type": "function", "function": {"name": ...}}`, param);
  if (tools.length > MAX_TOOLS) throw invalid(`${param} holds ${tools.length} tools; at most ${MAX_TOOLS} are allowed`, param);
  const names = tools.map((tool, index) => {
    const at = `${param}[${index}]`;
    const object = requireObject(tool, at, 'a tool like {"type": "function", "function": {"name": ...}}');
    refuseUnknownKeys(object, ['type', 'function'], at);
    checkToolType(object.type, `${at}.type`);
    return checkFunctionDefinition(requireObject(object.function, `${at}.function`, 'an object with name, description, parameters and strict'), `${at}.function`);
  });
  refuseDuplicates(names, param, (index) => `${param}[${index}].function.name`);
  return names;
}

/** `type` of a tool: only functions are served. */
export function checkToolType(type: unknown, param: string): void {
  if (type !== 'function') throw invalid(`${param} must be "function" (the only tool type served), got ${quoteValue(type)}`, param);
}

/**
 * A function's `name`, `description`, `parameters` and `strict`, in `definition` at `param`
 * (chat's `tools[i].function`; the flat tool itself on /v1/responses, which passes its extra keys in `allowed`).
 */
export function checkFunctionDefinition(definition: Fields, param: string, allowed: readonly string[] = []): string {
  refuseUnknownKeys(definition, ['name', 'description', 'parameters', 'strict', ...allowed], param);
  const name = checkToolName(definition.name, `${param}.name`);
  checkOptionalString(definition.description, `${param}.description`);
  if (definition.parameters !== undefined && definition.parameters !== null) {
    // A function's arguments are an object: OpenAI's rule, and what every engine's tool parser reads.
    const parameters = definition.parameters as Fields;
    if (typeof parameters !== 'object' || Array.isArray(parameters) || (parameters.type !== undefined && parameters.type !== 'object')) {
      throw invalid(`${param}.parameters must be a JSON Schema object ({"type": "object", …})`, `${param}.parameters`);
    }
    checkSchemaField(parameters, `${param}.parameters`);
  }
  checkBoolean(definition.strict, `${param}.strict`);
  return name;
}

export function checkToolName(name: unknown, param: string): string {
  if (name === undefined) throw invalid(`${param} is required: 1 to 64 letters, digits, _ or -`, param);
  if (typeof name !== 'string' || !TOOL_NAME_PATTERN.test(name)) {
    throw invalid(`${param} must be 1 to 64 letters, digits, _ or - (^[a-zA-Z0-9_-]{1,64}$), got ${quoteValue(name)}`, param);
  }
  return name;
}

/** A JSON Schema object in the supported subset (common/json-schema); a problem names its path below `param`. */
export function checkSchemaField(schema: unknown, param: string): void {
  const problem = checkJsonSchema(schema);
  if (!problem) return;
  const at = formatPath(param, problem.path);
  throw invalid(`${at} ${problem.message}`, at);
}

/**
 * `none`, `auto`, `required`, or `{type: "function", function: {name}}` naming a listed tool.
 * `toolNames` null: the request has no tools, so only `none` and `auto` make sense.
 */
export function checkChatToolChoice(choice: unknown, toolNames: readonly string[] | null, param: string): void {
  if (choice === undefined || choice === null) return;
  if (typeof choice === 'string') {
    checkToolChoiceMode(choice, toolNames, param);
    return;
  }
  const object = requireObject(choice, param, '"none", "auto", "required" or {"type": "function", "function": {"name": ...}}');
  refuseUnknownKeys(object, ['type', 'function'], param);
  checkToolType(object.type, `${param}.type`);
  const definition = requireObject(object.function, `${param}.function`, 'an object like {"name": ...}');
  refuseUnknownKeys(definition, ['name'], `${param}.function`);
  checkChosenTool(definition.name, toolNames, `${param}.function.name`);
}

export function checkToolChoiceMode(choice: string, toolNames: readonly string[] | null, param: string): void {
  if (!['none', 'auto', 'required'].includes(choice)) throw invalid(`${param} must be "none", "auto", "required" or a named function, got ${quoteValue(choice)}`, param);
  if (choice === 'required' && (toolNames === null || toolNames.length === 0)) throw invalid(`${param} is "required" but the request lists no tools`, param);
}

/** The name of a forced function: one of the request's tools. */
export function checkChosenTool(name: unknown, toolNames: readonly string[] | null, param: string): void {
  checkToolName(name, param);
  if (toolNames === null || toolNames.length === 0) throw invalid(`${param} names the function ${quoteValue(name)} but the request lists no tools`, param);
  if (!toolNames.includes(name as string)) throw invalid(`${param} must name one of the request's tools (${toolNames.join(', ')}), got ${quoteValue(name)}`, param);
}

/** `{type: "text"}`, `{type: "json_object"}` or `{type: "json_schema", json_schema: {name, schema, strict?, description?}}`. */
export function checkChatResponseFormat(format: unknown, param: string): void {
  if (format === undefined || format === null) return;
  const object = requireObject(format, param, '{"type": "text"}, {"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}');
  const type = object.type;
  if (type === 'text' || type === 'json_object') {
    refuseUnknownKeys(object, ['type'], param);
    return;
  }
  if (type !== 'json_schema') throw invalid(`${param}.type must be "text", "json_object" or "json_schema", got ${quoteValue(type)}`, `${param}.type`);
  refuseUnknownKeys(object, ['type', 'json_schema'], param);
  checkJsonSchemaFormat(requireObject(object.json_schema, `${param}.json_schema`, 'an object with name and schema'), `${param}.json_schema`);
}

/** The `{name, schema, strict?, description?}` of a json_schema format (flat in /v1/responses' `text.format`, which passes `type` in `allowed`). */
export function checkJsonSchemaFormat(definition: Fields, param: string, allowed: readonly string[] = []): void {
  refuseUnknownKeys(definition, ['name', 'schema', 'strict', 'description', ...allowed], param);
  checkToolName(definition.name, `${param}.name`);
  if (definition.schema === undefined) throw invalid(`${param}.schema is required: a JSON Schema object`, `${param}.schema`);
  checkSchemaField(definition.schema, `${param}.schema`);
  checkBoolean(definition.strict, `${param}.strict`);
  checkOptionalString(definition.description, `${param}.description`);
}

/** Chat's `logprobs` (boolean) and `top_logprobs` (0 to 20, only with logprobs true). */
export function checkLogprobs(logprobs: unknown, topLogprobs: unknown, logprobsParam: string, topParam: string): void {
  checkBoolean(logprobs, logprobsParam);
  if (topLogprobs === undefined || topLogprobs === null) return;
  if (!Number.isInteger(topLogprobs) || (topLogprobs as number) < 0 || (topLogprobs as number) > MAX_TOP_LOGPROBS) {
    throw invalid(`${topParam} must be an integer from 0 to ${MAX_TOP_LOGPROBS}, got ${quoteValue(topLogprobs)}`, topParam);
  }
  if (logprobs !== true) throw invalid(`${topParam} is only allowed when ${logprobsParam} is true`, topParam);
}

function checkBoolean(value: unknown, param: string): void {
  if (value !== undefined && value !== null && typeof value !== 'boolean') throw invalid(`${param} must be a boolean, got ${quoteValue(value)}`, param);
}

function checkOptionalString(value: unknown, param: string): void {
  if (value !== undefined && value !== null && typeof value !== 'string') throw invalid(`${param} must be a string, got ${quoteValue(value)}`, param);
}

function requireObject(value: unknown, param: string, expected: string): Fields {
  if (value === undefined || value === null) throw invalid(`${param} is required: ${expected}`, param);
  if (typeof value !== 'object' || Array.isArray(value)) throw invalid(`${param} must be ${expected}, got ${quoteValue(value)}`, param);
  return value as Fields;
}

/** A key we do not know would be dropped on the way to some engine: refused instead, by name. */
function refuseUnknownKeys(object: Fields, known: readonly string[], param: string): void {
  const unknown = Object.keys(object).find((key) => !known.includes(key));
  if (unknown !== undefined) throw invalid(`${param}.${unknown} is not supported; allowed: ${known.join(', ')}`, `${param}.${unknown}`);
}

function refuseDuplicates(names: readonly string[], param: string, paramOf: (index: number) => string): void {
  const seen = new Set<string>();
  names.forEach((name, index) => {
    if (seen.has(name)) throw invalid(`${param} has two functions named ${quoteValue(name)}; names must be unique`, paramOf(index));
    seen.add(name);
  });
}

function invalid(message: string, param: string): AppError {
  return new AppError('invalid_request', message, { param });
}
