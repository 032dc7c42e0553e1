import { AppError } from '../errors/app-error';
import { quoteValue } from '../errors/quote-value';
import { itemId as newId } from '../responses/response-ids';
import type {
  FunctionTool, InputContentPart, ResponseItem, ResponsesRequest, TextFormat, ToolChoice,
} from '../responses/response-items';
import { parseJsonObject } from './json-body';
import { checkFunctionDefinition, checkJsonSchemaFormat, checkToolName, checkToolType } from './tool-fields';

/** The fields a create request may carry; any other is refused by name (nothing is silently dropped). */
const KNOWN_FIELDS = new Set([
  'model', 'input', 'instructions', 'previous_response_id', 'store', 'stream', 'background', 'max_output_tokens', 'temperature', 'top_p',
  'tools', 'tool_choice', 'parallel_tool_calls', 'text', 'metadata', 'truncation', 'user', 'include', 'reasoning', 'stream_options', 'service_tier',
]);
const METADATA_PAIRS = 16;
const METADATA_KEY_CHARS = 64;
const METADATA_VALUE_CHARS = 512;

/**
 * Validates a `POST /v1/responses` body with OpenAI's types and ranges, naming each field as
 * OpenAI does (`input[2].content[0].image_url`, `tools[0].name`, `text.format.schema`), and
 * returns it normalised: input as items with ids, every setting with its default.
 */
export function parseResponsesRequest(raw: Buffer): ResponsesRequest {
  const fields = parseJsonObject(raw);
  for (const name of Object.keys(fields)) {
    if (!KNOWN_FIELDS.has(name)) throw invalid(`${name} is not a supported field of POST /v1/responses`, name);
  }
  const tools = parseTools(fields.tools);
  const request: ResponsesRequest = {
    model: optional(fields, 'model', 'a string', (value) => typeof value === 'string') as string | undefined,
    input: parseInput(fields.input),
    instructions: nullable(fields, 'instructions', 'a string', (value) => typeof value === 'string') as string | null,
    previousResponseId: nullable(fields, 'previous_response_id', 'a response id (resp_…)', (value) => typeof value === 'string' && value.length > 0 && value.length <= 128) as string | null,
    store: (nullable(fields, 'store', 'a boolean', isBoolean) ?? true) as boolean,
    stream: (nullable(fields, 'stream', 'a boolean', isBoolean) ?? false) as boolean,
    background: (nullable(fields, 'background', 'a boolean', isBoolean) ?? false) as boolean,
    maxOutputTokens: nullable(fields, 'max_output_tokens', 'an integer of at least 1', (value) => Number.isInteger(value) && (value as number) >= 1) as number | null,
    temperature: nullable(fields, 'temperature', 'a number from 0 to 2', (value) => isNumber(value) && value >= 0 && value <= 2) as number | null,
    topP: nullable(fields, 'top_p', 'a number from 0 to 1', (value) => isNumber(value) && value >= 0 && value <= 1) as number | null,
    tools,
    toolChoice: parseToolChoice(fields.tool_choice, tools),
    parallelToolCalls: (nullable(fields, 'parallel_tool_calls', 'a boolean', isBoolean) ?? true) as boolean,
    text: { format: parseText(fields.text) },
    metadata: parseMetadata(fields.metadata),
    truncation: parseTruncation(fields.truncation),
    user: nullable(fields, 'user', 'a string', (value) => typeof value === 'string') as string | null,
  };
  refuseUnsupported(fields);
  if (request.input.length === 0 && request.previousResponseId === null) throw invalid('input must not be empty', 'input');
  if (fields.stream_options != null && !request.stream) throw invalid('stream_options is only allowed when stream is true', 'stream_options');
  if (request.background && !request.store) throw invalid('background requires store: a background response is retrieved by its id', 'background');
  return request;
}

/** Fields we read only to refuse what they ask for, naming it. */
function refuseUnsupported(fields: Record<string, unknown>): void {
  const include = fields.include;
  if (include != null) {
    if (!Array.isArray(include)) throw invalid('include must be an array of strings', 'include');
    if (include.length > 0) throw invalid(`include: ${quoteValue(include[0])} is not supported here (no value of include is)`, 'include[0]');
  }
  const reasoning = fields.reasoning;
  if (reasoning != null) {
    if (!isObject(reasoning)) throw invalid('reasoning must be an object', 'reasoning');
    for (const [name, value] of Object.entries(reasoning)) {
      if (value != null) throw invalid(`reasoning.${name} is not supported: the deployment's model has no reasoning settings`, `reasoning.${name}`);
    }
  }
  if (fields.service_tier != null && fields.service_tier !== 'auto' && fields.service_tier !== 'default') {
    throw invalid(`service_tier must be "auto" or "default", got ${quoteValue(fields.service_tier)}`, 'service_tier');
  }
  if (fields.stream_options != null && !(isObject(fields.stream_options) && Object.keys(fields.stream_options).every((name) => name === 'include_obfuscation'))) {
    throw invalid('stream_options may only hold include_obfuscation', 'stream_options');
  }
  // Our events carry no obfuscation padding: asking for it would be a field we accept and ignore.
  if (isObject(fields.stream_options) && fields.stream_options.include_obfuscation === true) {
    throw invalid('stream_options.include_obfuscation: events are not padded here; send false or leave it out', 'stream_options.include_obfuscation');
  }
}

function parseInput(input: unknown): ResponseItem[] {
  if (input === undefined || input === null) return [];
  if (typeof input === 'string') return [{ id: newId('msg'), type: 'message', role: 'user', content: [{ type: 'input_text', text: input }] }];
  if (!Array.isArray(input)) throw invalid('input must be a string or an array of input items', 'input');
  return input.map((item, index) => parseItem(item, `input[${index}]`));
}

function parseItem(item: unknown, path: string): ResponseItem {
  if (!isObject(item)) throw invalid(`${path} must be an input item object`, path);
  const type = item.type ?? 'message';
  const id = optionalId(item, path);
  if (type === 'message') {
    const role = item.role;
    if (role !== 'user' && role !== 'system' && role !== 'developer' && role !== 'assistant') {
      throw invalid(`${path}.role must be one of user, system, developer, assistant, got ${quoteValue(role)}`, `${path}.role`);
    }
    return { id: id ?? newId('msg'), type: 'message', role, content: parseContent(item.content, `${path}.content`, role === 'assistant') };
  }
  if (type === 'function_call') {
    const callId = requiredString(item, 'call_id', path);
    const name = checkToolName(item.name, `${path}.name`);
    if (typeof item.arguments !== 'string') throw invalid(`${path}.arguments must be a string of JSON`, `${path}.arguments`);
    return { id: id ?? newId('fc'), type: 'function_call', call_id: callId, name, arguments: item.arguments, status: 'completed' };
  }
  if (type === 'function_call_output') {
    const callId = requiredString(item, 'call_id', path);
    if (typeof item.output !== 'string') throw invalid(`${path}.output must be a string`, `${path}.output`);
    return { id: id ?? newId('fco'), type: 'function_call_output', call_id: callId, output: item.output, status: 'completed' };
  }
  throw invalid(`${path}.type must be one of message, function_call, function_call_output, got ${quoteValue(type)}`, `${path}.type`);
}

function parseContent(content: unknown, path: string, assistant: boolean): InputContentPart[] {
  if (typeof content === 'string') return [assistant ? { type: 'output_text', text: content, annotations: [] } : { type: 'input_text', text: content }];
  if (!Array.isArray(content)) throw invalid(`${path} must be a string or an array of content parts`, path);
  return content.map((part, index): InputContentPart => {
    const at = `${path}[${index}]`;
    if (!isObject(part)) throw invalid(`${at} must be a content part object`, at);
    const allowed = assistant ? ['output_text', 'refusal'] : ['input_text', 'input_image'];
    if (!allowed.includes(part.type as string)) throw invalid(`${at}.type must be one of ${allowed.join(', ')}, got ${quoteValue(part.type)}`, `${at}.type`);
    if (part.type === 'input_image') {
      if (typeof part.image_url !== 'string' || !/^(https?:|data:image\/)/.test(part.image_url)) {
        throw invalid(`${at}.image_url must be an http(s) URL or a data:image/… URL (file_id is not supported)`, `${at}.image_url`);
      }
      const detail = part.detail ?? 'auto';
      if (detail !== 'auto' && detail !== 'low' && detail !== 'high') throw invalid(`${at}.detail must be auto, low or high`, `${at}.detail`);
      return { type: 'input_image', image_url: part.image_url, detail };
    }
    const key = part.type === 'refusal' ? 'refusal' : 'text';
    if (typeof part[key] !== 'string') throw invalid(`${at}.${key} must be a string`, `${at}.${key}`);
    return part.type === 'input_text' ? { type: 'input_text', text: part.text as string } : { type: 'output_text', text: part[key] as string, annotations: [] };
  });
}

function parseTools(tools: unknown): FunctionTool[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw invalid('tools must be an array of function tools', 'tools');
  const seen = new Set<string>();
  return tools.map((tool, index) => {
    const path = `tools[${index}]`;
    if (!isObject(tool)) throw invalid(`${path} must be a tool object`, path);
    // The chat checks on Responses' flat shape: the name, and `parameters` in the schema subset
    // every engine honours (an unsupported keyword is a 400 naming it, as on chat).
    checkToolType(tool.type, `${path}.type`);
    checkFunctionDefinition(tool, path, ['type']);
    if (seen.has(tool.name as string)) throw invalid(`${path}.name: the tool '${tool.name as string}' is listed twice`, `${path}.name`);
    seen.add(tool.name as string);
    return {
      type: 'function', name: tool.name as string, description: (tool.description as string | undefined) ?? null,
      parameters: (tool.parameters as Record<string, unknown> | undefined) ?? null, strict: (tool.strict as boolean | undefined) ?? null,
    };
  });
}

function parseToolChoice(choice: unknown, tools: FunctionTool[]): ToolChoice {
  if (choice === undefined || choice === null) return 'auto';
  if (choice === 'none' || choice === 'auto' || choice === 'required') {
    if (choice === 'required' && tools.length === 0) throw invalid('tool_choice "required" needs tools', 'tool_choice');
    return choice;
  }
  if (isObject(choice) && choice.type === 'function') {
    if (typeof choice.name !== 'string') throw invalid('tool_choice.name must name a function of tools', 'tool_choice.name');
    if (!tools.some((tool) => tool.name === choice.name)) {
      throw invalid(`tool_choice.name '${choice.name}' is not in tools (${tools.map((tool) => tool.name).join(', ') || 'none'})`, 'tool_choice.name');
    }
    return { type: 'function', name: choice.name };
  }
  throw invalid(`tool_choice must be "none", "auto", "required" or {"type": "function", "name": …}, got ${quoteValue(choice)}`, 'tool_choice');
}

function parseText(text: unknown): TextFormat {
  if (text === undefined || text === null) return { type: 'text' };
  if (!isObject(text)) throw invalid('text must be an object like {"format": {"type": "text"}}', 'text');
  for (const name of Object.keys(text)) if (name !== 'format' && name !== 'verbosity') throw invalid(`text.${name} is not supported`, `text.${name}`);
  if (text.verbosity != null && text.verbosity !== 'medium') throw invalid('text.verbosity: only "medium" (the model\'s own) is served', 'text.verbosity');
  const format = text.format;
  if (format === undefined || format === null) return { type: 'text' };
  if (!isObject(format)) throw invalid('text.format must be an object', 'text.format');
  if (format.type === 'text') return { type: 'text' };
  if (format.type === 'json_object') return { type: 'json_object' };
  if (format.type !== 'json_schema') throw invalid(`text.format.type must be text, json_object or json_schema, got ${quoteValue(format.type)}`, 'text.format.type');
  checkJsonSchemaFormat(format, 'text.format', ['type']);
  return {
    type: 'json_schema', name: format.name as string, schema: format.schema as Record<string, unknown>, strict: (format.strict as boolean | undefined) ?? null,
    ...(typeof format.description === 'string' ? { description: format.description } : {}),
  };
}

function parseMetadata(metadata: unknown): Record<string, string> {
  if (metadata === undefined || metadata === null) return {};
  if (!isObject(metadata)) throw invalid('metadata must be an object of up to 16 string pairs', 'metadata');
  const entries = Object.entries(metadata);
  if (entries.length > METADATA_PAIRS) throw invalid(`metadata holds at most ${METADATA_PAIRS} pairs, got ${entries.length}`, 'metadata');
  for (const [key, value] of entries) {
    if (key.length > METADATA_KEY_CHARS) throw invalid(`metadata keys are at most ${METADATA_KEY_CHARS} characters`, `metadata.${key.slice(0, 64)}`);
    if (typeof value !== 'string' || value.length > METADATA_VALUE_CHARS) {
      throw invalid(`metadata.${key} must be a string of at most ${METADATA_VALUE_CHARS} characters`, `metadata.${key}`);
    }
  }
  return metadata as Record<string, string>;
}

/**
 * `disabled` (the default) or `auto`. `auto` would drop the oldest items to fit the model's
 * context, and the catalog states no context length to fit: refused rather than pretended.
 */
function parseTruncation(truncation: unknown): 'disabled' {
  if (truncation === undefined || truncation === null || truncation === 'disabled') return 'disabled';
  if (truncation === 'auto') {
    throw invalid('truncation "auto" is not supported: the deployment\'s context length is not known to the platform; send "disabled" and trim the conversation yourself', 'truncation');
  }
  throw invalid(`truncation must be "disabled" or "auto", got ${quoteValue(truncation)}`, 'truncation');
}

function optionalId(item: Record<string, unknown>, path: string): string | undefined {
  if (item.id === undefined || item.id === null) return undefined;
  if (typeof item.id !== 'string' || item.id.length === 0 || item.id.length > 128) throw invalid(`${path}.id must be a string`, `${path}.id`);
  return item.id;
}

function requiredString(item: Record<string, unknown>, name: string, path: string): string {
  const value = item[name];
  if (typeof value !== 'string' || value.length === 0) throw invalid(`${path}.${name} is required: a non-empty string`, `${path}.${name}`);
  return value;
}

function optional(fields: Record<string, unknown>, name: string, expected: string, valid: (value: unknown) => boolean): unknown {
  const value = fields[name];
  if (value === undefined || value === null) return undefined;
  if (!valid(value)) throw invalid(`${name} must be ${expected}, got ${quoteValue(value)}`, name);
  return value;
}

function nullable(fields: Record<string, unknown>, name: string, expected: string, valid: (value: unknown) => boolean): unknown {
  return optional(fields, name, expected, valid) ?? null;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isBoolean(value: unknown): boolean {
  return typeof value === 'boolean';
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function invalid(message: string, param: string): AppError {
  return new AppError('invalid_request', message, { param });
}
