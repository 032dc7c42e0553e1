import { parseJsonText } from '../../../common/json-nesting';
import { AppError } from '../../../control-plane/api/errors';
import { parseTextRequest } from '../../../control-plane/api/inference';
import type { PlaygroundChatInput } from '../types/playground.type';

/** The chat request a playground input stands for, checked as /v1/chat/completions checks its body. */
export interface PlaygroundChatBody {
  readonly body: Buffer;
  readonly fields: Record<string, unknown>;
}

/**
 * The input as a Chat Completions body (always streamed, with usage), checked by the same
 * OpenAI request model as `/v1/chat/completions` (`parseTextRequest`): the JSON fields are
 * parsed first (not JSON: BAD_USER_INPUT naming the field), then every rule of the REST API
 * applies, its refusal renamed to the input's field (`response_format.json_schema.schema.x` is
 * `responseSchema.x` here, `tool_choice` is `toolChoice`).
 */
export function playgroundChatBody(input: PlaygroundChatInput): PlaygroundChatBody {
  const fields: Record<string, unknown> = {
    // An adapter's name addresses it as on /v1 (docs/adapters.md); absent: the deployment's base model.
    ...(present(input.model) ? { model: input.model.trim() } : {}),
    messages: input.messages.map((message, index) => messageOf(message, index)),
    stream: true,
    stream_options: { include_usage: true },
  };
  if (present(input.tools)) fields.tools = jsonField(input.tools, 'tools');
  if (present(input.toolChoice)) {
    const choice = input.toolChoice.trim();
    fields.tool_choice = choice.startsWith('{') ? jsonField(choice, 'toolChoice') : choice;
  }
  if (present(input.responseSchema)) {
    fields.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: jsonField(input.responseSchema, 'responseSchema'), strict: true } };
  }
  if (input.maxTokens !== undefined && input.maxTokens !== null) fields.max_tokens = input.maxTokens;
  if (input.temperature !== undefined && input.temperature !== null) fields.temperature = input.temperature;
  const body = Buffer.from(JSON.stringify(fields));
  try {
    return { fields: parseTextRequest(body, 'chat.completions').fields, body };
  } catch (error) {
    throw error instanceof AppError ? renamed(error) : error;
  }
}

function messageOf(message: PlaygroundChatInput['messages'][number], index: number): Record<string, unknown> {
  const out: Record<string, unknown> = { role: message.role, content: message.content ?? '' };
  if (present(message.toolCallId)) out.tool_call_id = message.toolCallId;
  if (present(message.toolCalls)) {
    out.tool_calls = jsonField(message.toolCalls, `messages[${index}].toolCalls`);
    if (!message.content) out.content = null;
  }
  return out;
}

function present(value: string | null | undefined): value is string {
  return typeof value === 'string' && value.trim() !== '';
}

/** A field holding JSON text, parsed (nesting checked before anything is built), or BAD_USER_INPUT naming it. */
function jsonField(text: string, param: string): unknown {
  try {
    return parseJsonText(text);
  } catch (error) {
    throw new AppError('invalid_request', `${param} is not valid JSON: ${(error as Error).message}`, { param, cause: error });
  }
}

/** The REST field names of a refusal, as this input names them. */
const RENAMES: ReadonlyArray<readonly [string, string]> = [
  ['response_format.json_schema.schema', 'responseSchema'],
  ['response_format', 'responseSchema'],
  ['tool_choice', 'toolChoice'],
  ['max_tokens', 'maxTokens'],
];

function renamed(error: AppError): AppError {
  const param = error.param ?? undefined;
  const rename = param === undefined ? undefined : RENAMES.find(([rest]) => param === rest || param.startsWith(`${rest}.`) || param.startsWith(`${rest}[`));
  if (!rename || param === undefined) return error;
  const [rest, ours] = rename;
  const message = error.message.split(rest).join(ours);
  return new AppError(error.code, message, { param: ours + param.slice(rest.length), cause: error });
}
