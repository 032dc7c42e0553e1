import { AppError } from '../errors/app-error';
import { parseJsonObject } from './json-body';
import { quoteValue } from '../errors/quote-value';
import { refuseCacheSalt } from './cache-salt-field';
import { checkChatToolFields } from './tool-fields';

import type { TextEndpoint } from '../pipeline/inference-pipeline';

export type { TextEndpoint };

/** What a chat/completion route or batch line needs from the body; everything else passes through untouched. */
export interface TextRequest {
  model: string | undefined;
  stream: boolean;
  includeUsage: boolean;
  /** The parsed body (read by the shared endpoint, which may add a `max_tokens` bound). */
  fields: Record<string, unknown>;
}

/**
 * Checks the fields docs/api-contract.md#chat-and-completions names, with OpenAI's types and ranges, so bad input is a 400
 * naming the field instead of an engine error. Unknown fields are not looked at, but for
 * `cache_salt`, which only the platform sets (cache-salt-field.ts).
 */
export function parseTextRequest(raw: Buffer, endpoint: TextEndpoint): TextRequest {
  const fields = parseJsonObject(raw);
  refuseCacheSalt(fields);
  if (endpoint === 'chat.completions') {
    checkMessages(fields.messages);
    checkChatToolFields(fields);
  } else {
    checkPrompt(fields.prompt);
  }
  optional(fields, 'model', 'a string', (value) => typeof value === 'string');
  optional(fields, 'stream', 'a boolean', (value) => typeof value === 'boolean');
  optional(fields, 'temperature', 'a number from 0 to 2', (value) => isNumber(value) && value >= 0 && value <= 2);
  optional(fields, 'top_p', 'a number from 0 to 1', (value) => isNumber(value) && value >= 0 && value <= 1);
  optional(fields, 'max_tokens', 'an integer of at least 1', (value) => Number.isInteger(value) && (value as number) >= 1);
  optional(fields, 'max_completion_tokens', 'an integer of at least 1', (value) => Number.isInteger(value) && (value as number) >= 1);
  optional(fields, 'n', 'an integer from 1 to 128', (value) => Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 128);
  optional(fields, 'frequency_penalty', 'a number from -2 to 2', (value) => isNumber(value) && value >= -2 && value <= 2);
  optional(fields, 'presence_penalty', 'a number from -2 to 2', (value) => isNumber(value) && value >= -2 && value <= 2);
  optional(fields, 'stop', 'a string or an array of up to 4 strings',
    (value) => typeof value === 'string' || (Array.isArray(value) && value.length <= 4 && value.every((item) => typeof item === 'string')));
  optional(fields, 'stream_options', 'an object like {"include_usage": true}',
    (value) => typeof value === 'object' && !Array.isArray(value) && (value === null || isOptionalBoolean((value as Record<string, unknown>).include_usage)));
  const stream = fields.stream === true;
  const streamOptions = fields.stream_options as { include_usage?: boolean } | null | undefined;
  if (streamOptions && !stream) throw invalid('stream_options is only allowed when stream is true', 'stream_options');
  return { model: fields.model as string | undefined, stream, includeUsage: stream && streamOptions?.include_usage === true, fields };
}

function checkMessages(messages: unknown): void {
  if (messages === undefined) throw invalid('messages is required: an array of chat messages', 'messages');
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages must be a non-empty array of chat messages', 'messages');
  messages.forEach((message, index) => {
    if (typeof message !== 'object' || message === null || Array.isArray(message)) {
      throw invalid(`messages[${index}] must be an object with a role`, `messages[${index}]`);
    }
    const role = (message as Record<string, unknown>).role;
    if (typeof role !== 'string' || !['system', 'developer', 'user', 'assistant', 'tool', 'function'].includes(role)) {
      throw invalid(`messages[${index}].role must be one of system, developer, user, assistant, tool, function`, `messages[${index}].role`);
    }
  });
}

function checkPrompt(prompt: unknown): void {
  if (prompt === undefined) throw invalid('prompt is required: a string or an array of strings', 'prompt');
  const ok = typeof prompt === 'string'
    || (Array.isArray(prompt) && prompt.length > 0 && (prompt.every((item) => typeof item === 'string')
      || prompt.every((item) => Number.isInteger(item))
      || prompt.every((item) => Array.isArray(item) && item.every((token) => Number.isInteger(token)))));
  if (!ok) throw invalid('prompt must be a string, an array of strings, or token arrays', 'prompt');
}

function optional(fields: Record<string, unknown>, name: string, expected: string, valid: (value: unknown) => boolean): void {
  const value = fields[name];
  if (value === undefined || value === null) return;
  if (!valid(value)) throw invalid(`${name} must be ${expected}, got ${quoteValue(value)}`, name);
}

function isNumber(value: unknown): value is number {
  return typeof value === 'number' && Number.isFinite(value);
}

function isOptionalBoolean(value: unknown): boolean {
  return value === undefined || typeof value === 'boolean';
}

function invalid(message: string, param: string | null): AppError {
  return new AppError('invalid_request', message, { param });
}
