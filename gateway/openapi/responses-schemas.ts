import {
  array, boolean, closedObject, constant, integer, nullable, number, oneOfStrings, openObject, ref, string, type JsonObject,
} from './schema-helpers';

/**
 * The Responses API's shapes (docs/api-contract.md#responses-api), as control-plane/responses
 * writes them (response-object.ts, response-items.ts, chat-to-response.ts) and
 * gateway/v1/responses reads them. Everything here is the gateway's own writing: closed.
 */
const RESPONSE_STATUSES = ['queued', 'in_progress', 'completed', 'incomplete', 'failed', 'cancelled'];
const ITEM_STATUS = oneOfStrings(['completed', 'incomplete', 'in_progress']);
const METADATA = { type: 'object', additionalProperties: { type: 'string', maxLength: 512 }, maxProperties: 16, description: 'up to 16 string pairs' };
const SCHEMA_OBJECT = { type: 'object', description: 'a JSON Schema object' };
const TOOL_NAME = { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' };

const OUTPUT_TEXT = closedObject({ type: constant('output_text'), text: string(), annotations: { type: 'array', maxItems: 0 } });
const INPUT_TEXT = closedObject({ type: constant('input_text'), text: string() });
const INPUT_IMAGE = closedObject({ type: constant('input_image'), image_url: string('an http(s) or data:image/… URL'), detail: oneOfStrings(['auto', 'low', 'high']) });

/** Items as a request sends them: ids, statuses and a message's string content are optional. */
const REQUEST_ITEMS: JsonObject[] = [
  openObject({
    type: constant('message'), id: string(), role: oneOfStrings(['user', 'system', 'developer', 'assistant']),
    content: {
      anyOf: [string(), array({ type: 'object', description: '`input_text` / `input_image` parts; an assistant\'s `output_text` or `refusal`' })],
    },
  }, ['role', 'content'], 'a message; `type` may be left out'),
  openObject({ type: constant('function_call'), id: string(), call_id: string(), name: TOOL_NAME, arguments: string('JSON text') }, ['type', 'call_id', 'name', 'arguments']),
  openObject({ type: constant('function_call_output'), id: string(), call_id: string(), output: string() }, ['type', 'call_id', 'output']),
];

const FUNCTION_TOOL = closedObject({
  type: constant('function'), name: TOOL_NAME, description: nullable(string()), parameters: nullable(SCHEMA_OBJECT), strict: nullable(boolean()),
}, ['type', 'name', 'description', 'parameters', 'strict']);

const TOOL_CHOICE = { anyOf: [oneOfStrings(['none', 'auto', 'required']), closedObject({ type: constant('function'), name: TOOL_NAME })] };

/** `text.format`; `strict` is optional in a request and echoed (null when not sent) in a Response. */
const textFormat = (jsonSchemaRequired: readonly string[]): JsonObject => ({
  anyOf: [
    closedObject({ type: constant('text') }),
    closedObject({ type: constant('json_object') }),
    closedObject({
      type: constant('json_schema'), name: TOOL_NAME, schema: SCHEMA_OBJECT, strict: nullable(boolean()), description: string(),
    }, jsonSchemaRequired),
  ],
});

/** Every typed event of a stream: `type` and `sequence_number` (from 0, one more each event), then its own fields. */
const event = (type: string, fields: Record<string, JsonObject>, description: string): JsonObject => closedObject({
  type: constant(type), sequence_number: integer(), ...fields,
}, undefined, description);
const AT_PART = { item_id: string(), output_index: integer(), content_index: integer() };

export const RESPONSES_SCHEMAS: Record<string, JsonObject> = {
  ResponsesRequest: closedObject({
    model: string('on a deployment\'s URL optional (it must name the deployment\'s model); on /v1 the deployment\'s slug or model; on /shared/v1 `shared/<model-id>`'),
    input: { anyOf: [string('one user message'), array({ anyOf: REQUEST_ITEMS })], description: 'required unless `previous_response_id`' },
    instructions: nullable(string('a leading system message, not carried to later turns')),
    previous_response_id: nullable(string('a stored response of the same workspace and deployment')),
    store: nullable(boolean('default true')), stream: nullable(boolean('typed SSE events')),
    background: nullable(boolean('default false; needs store')),
    max_output_tokens: nullable({ type: 'integer', minimum: 1 }), temperature: nullable({ type: 'number', minimum: 0, maximum: 2 }),
    top_p: nullable({ type: 'number', minimum: 0, maximum: 1 }),
    tools: nullable(array(openObject({ type: constant('function'), name: TOOL_NAME, description: nullable(string()), parameters: nullable(SCHEMA_OBJECT), strict: nullable(boolean()) }, ['type', 'name']))),
    tool_choice: nullable(TOOL_CHOICE), parallel_tool_calls: nullable(boolean()),
    text: nullable(closedObject({ format: nullable(textFormat(['type', 'name', 'schema'])), verbosity: nullable(constant('medium')) }, [])),
    metadata: nullable(METADATA), truncation: nullable(constant('disabled')), user: nullable(string()),
    include: nullable({ type: 'array', maxItems: 0, description: 'no value is served' }),
    reasoning: nullable({ type: 'object', additionalProperties: { type: 'null' }, description: 'only nulls: no reasoning settings' }),
    stream_options: nullable(closedObject({ include_obfuscation: {} }, [])),
    service_tier: nullable(oneOfStrings(['auto', 'default'])),
  }, [], 'Any other field is refused (400 naming it); so are `truncation: "auto"`, `include` values and `reasoning` settings.'),
  ResponseOutputMessage: closedObject({
    id: string(), type: constant('message'), role: constant('assistant'), status: ITEM_STATUS, content: array(OUTPUT_TEXT, 'one `output_text` part (none while `in_progress` in `output_item.added`)'),
  }),
  ResponseFunctionCall: closedObject({ id: string(), type: constant('function_call'), call_id: string(), name: string(), arguments: string('JSON text'), status: ITEM_STATUS }),
  ResponseOutputItem: { anyOf: [ref('ResponseOutputMessage'), ref('ResponseFunctionCall')] },
  ResponseInputItem: {
    anyOf: [
      closedObject({
        id: string(), type: constant('message'), role: oneOfStrings(['user', 'system', 'developer', 'assistant']), status: ITEM_STATUS,
        content: array({ anyOf: [INPUT_TEXT, INPUT_IMAGE, OUTPUT_TEXT] }),
      }, ['id', 'type', 'role', 'content']),
      ref('ResponseFunctionCall'),
      closedObject({ id: string(), type: constant('function_call_output'), call_id: string(), output: string(), status: constant('completed') }, ['id', 'type', 'call_id', 'output']),
    ],
    description: 'An input item as stored: every message with an id, its content as parts.',
  },
  ResponseUsage: closedObject({
    input_tokens: integer(), input_tokens_details: closedObject({ cached_tokens: integer('prompt tokens served from the prefix cache') }),
    output_tokens: integer(), output_tokens_details: closedObject({ reasoning_tokens: integer('always 0') }), total_tokens: integer(),
  }),
  Response: closedObject({
    id: { type: 'string', pattern: '^resp_' }, object: constant('response'), created_at: integer(), status: oneOfStrings(RESPONSE_STATUSES),
    background: boolean(), error: nullable(closedObject({ code: string(), message: string() })),
    incomplete_details: nullable(closedObject({ reason: oneOfStrings(['max_output_tokens', 'content_filter', 'client_disconnected']) })),
    instructions: nullable(string()), max_output_tokens: nullable(integer()), metadata: METADATA, model: string(),
    output: array(ref('ResponseOutputItem')), parallel_tool_calls: boolean(), previous_response_id: nullable(string()),
    reasoning: closedObject({ effort: { type: 'null' }, summary: { type: 'null' } }), store: boolean(),
    temperature: nullable(number()), text: closedObject({ format: textFormat(['type', 'name', 'schema', 'strict']) }), tool_choice: TOOL_CHOICE, tools: array(FUNCTION_TOOL),
    top_p: nullable(number()), truncation: oneOfStrings(['disabled', 'auto']), usage: nullable(ref('ResponseUsage')), user: nullable(string()),
  }, undefined, 'docs/api-contract.md#responses-api; `output_text` is the SDKs\' (computed from `output`).'),
  ResponseDeleted: closedObject({ id: string(), object: constant('response'), deleted: { type: 'boolean', const: true } }),
  ResponseInputItemList: closedObject({
    object: constant('list'), data: array(ref('ResponseInputItem')), first_id: nullable(string()), last_id: nullable(string()), has_more: boolean(),
  }),
  ResponseStreamEvent: {
    anyOf: [
      event('response.created', { response: ref('Response') }, 'first: the response, in progress'),
      event('response.in_progress', { response: ref('Response') }, ''),
      event('response.output_item.added', { output_index: integer(), item: ref('ResponseOutputItem') }, 'an item opens'),
      event('response.content_part.added', { ...AT_PART, part: OUTPUT_TEXT }, ''),
      event('response.output_text.delta', { ...AT_PART, delta: string(), logprobs: { type: 'array', maxItems: 0 } }, ''),
      event('response.output_text.done', { ...AT_PART, text: string(), logprobs: { type: 'array', maxItems: 0 } }, ''),
      event('response.content_part.done', { ...AT_PART, part: OUTPUT_TEXT }, ''),
      event('response.function_call_arguments.delta', { item_id: string(), output_index: integer(), delta: string() }, ''),
      event('response.function_call_arguments.done', { item_id: string(), output_index: integer(), name: string(), arguments: string() }, ''),
      event('response.output_item.done', { output_index: integer(), item: ref('ResponseOutputItem') }, 'an item closes'),
      event('response.completed', { response: ref('Response') }, 'last: the stored response'),
      event('response.incomplete', { response: ref('Response') }, 'last: cut by max_output_tokens, a filter or the client'),
      event('response.failed', { response: ref('Response') }, 'last: the engine failed after the start'),
      closedObject({ type: constant('error'), sequence_number: integer(), message: string(), param: nullable(string()), code: nullable(string()) },
        undefined, 'last, instead of a response event: a failure before the response could be stored'),
    ],
    description: 'One `data:` line of a Responses stream (its `event:` line names the same `type`).',
  },
};
