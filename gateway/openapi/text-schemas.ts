import { STAND_IN_ENGINE_LABEL } from '../stand-in-engine';
import {
  array, boolean, closedObject, constant, integer, nullable, number, oneOfStrings, openObject, ref, string, type JsonObject,
} from './schema-helpers';

const STOP = { anyOf: [string(), array(string(), 'up to 4 sequences')], description: 'a string or a list of strings' };
const FINISH_REASON = oneOfStrings(['stop', 'length', 'tool_calls', 'content_filter', 'function_call']);
const TOKEN_LIST = array(integer());

/** The sampling fields chat and completions share (docs/api-contract.md#chat-and-completions); defaults are the engine's. */
const SAMPLING: Record<string, JsonObject> = {
  model: string('optional; when sent it must name the endpoint\'s model (else 400 `model_mismatch`)'),
  stream: boolean('`true`: an SSE stream of chunks ending in `data: [DONE]`'),
  stream_options: openObject({ include_usage: boolean('a last chunk with `choices: []` and the usage') }, []),
  temperature: number(), top_p: number(), max_tokens: integer(), frequency_penalty: number(), presence_penalty: number(),
  stop: STOP, n: integer('choices per call (default 1)'), seed: integer(), user: string(),
};

const CACHE_SALT_NOTE = 'Every other standard field goes to the engine untouched; `cache_salt` is refused (400, `param: "cache_salt"`): '
  + 'the platform salts each workspace\'s prefix cache itself.';

const TOOL_NAME = { type: 'string', pattern: '^[a-zA-Z0-9_-]{1,64}$' };
const SCHEMA_OBJECT = { type: 'object', description: 'a JSON Schema object in the supported subset (docs/api-contract.md#tools-and-structured-outputs)' };

/** Chat's tools and structured-output fields, as control-plane/openai/tool-fields.ts checks them: unknown keys inside are refused (400 naming them). */
const TOOL_FIELDS: Record<string, JsonObject> = {
  tools: {
    ...array(closedObject({
      type: constant('function'),
      function: closedObject({ name: TOOL_NAME, description: string(), parameters: SCHEMA_OBJECT, strict: nullable(boolean()) }, ['name']),
    }), 'function tools, names unique'),
    maxItems: 128,
  },
  tool_choice: {
    anyOf: [oneOfStrings(['none', 'auto', 'required']), closedObject({ type: constant('function'), function: closedObject({ name: TOOL_NAME }) })],
    description: '`required` or a named function needs `tools`; a named one must be listed',
  },
  parallel_tool_calls: boolean(),
  response_format: {
    anyOf: [
      closedObject({ type: constant('text') }), closedObject({ type: constant('json_object') }),
      closedObject({
        type: constant('json_schema'),
        json_schema: closedObject({ name: TOOL_NAME, schema: SCHEMA_OBJECT, strict: nullable(boolean()), description: string() }, ['name', 'schema']),
      }),
    ],
  },
  logprobs: boolean(), top_logprobs: { type: 'integer', minimum: 0, maximum: 20, description: 'only with `logprobs: true`' },
};

/** A choice's `logprobs` (OpenAI's shape; engines may add fields). */
const TOKEN_LOGPROB = openObject({ token: string(), logprob: number(), bytes: nullable(array(integer())) }, ['token', 'logprob']);
const CHOICE_LOGPROBS = nullable(openObject({
  content: nullable(array(openObject({ token: string(), logprob: number(), bytes: nullable(array(integer())), top_logprobs: array(TOKEN_LOGPROB) }, ['token', 'logprob']))),
  refusal: nullable(array(TOKEN_LOGPROB)),
}, []));

const TOOL_CALL = openObject({
  index: integer('in stream deltas'), id: string(), type: constant('function'),
  function: openObject({ name: string(), arguments: string('JSON text') }, []),
}, []);

export const TEXT_SCHEMAS: Record<string, JsonObject> = {
  ChatMessage: openObject({
    role: oneOfStrings(['system', 'developer', 'user', 'assistant', 'tool']),
    content: { anyOf: [string(), array({ type: 'object', description: 'a content part: text, image_url (passed to vision models), …' }), { type: 'null' }] },
    name: string(), tool_calls: array(TOOL_CALL), tool_call_id: string(),
  }, ['role']),
  ChatCompletionRequest: openObject({
    ...SAMPLING,
    messages: { ...array(ref('ChatMessage')), minItems: 1 },
    ...TOOL_FIELDS, max_completion_tokens: integer(),
  }, ['messages'], CACHE_SALT_NOTE),
  ChatCompletion: openObject({
    id: string(), object: constant('chat.completion'), created: integer(), model: string(),
    choices: array(openObject({
      index: integer(),
      message: openObject({ role: constant('assistant'), content: nullable(string()), tool_calls: array(TOOL_CALL), refusal: nullable(string()) }, ['role', 'content']),
      logprobs: CHOICE_LOGPROBS, finish_reason: FINISH_REASON,
    }, ['index', 'message', 'finish_reason'])),
    usage: ref('CompletionUsage'),
  }, ['id', 'object', 'created', 'model', 'choices', 'usage']),
  ChatCompletionChunk: openObject({
    id: string(), object: constant('chat.completion.chunk'), created: integer(), model: string(),
    choices: array(openObject({
      index: integer(),
      delta: openObject({ role: constant('assistant'), content: nullable(string()), tool_calls: array(TOOL_CALL), refusal: nullable(string()) }, []),
      logprobs: CHOICE_LOGPROBS, finish_reason: nullable(FINISH_REASON),
    }, ['index', 'delta', 'finish_reason'])),
    usage: nullable(ref('CompletionUsage')),
  }, ['id', 'object', 'created', 'model', 'choices'], 'One `data:` event of a chat stream; with `stream_options.include_usage` the last one has `choices: []` and the usage.'),
  ChatCompletionStreamEvent: {
    anyOf: [ref('ChatCompletionChunk'), ref('Error')],
    description: 'What a chat stream\'s `data:` line holds: a chunk, or, when the call fails after the stream started, one error body, after which the stream closes.',
  },
  CompletionRequest: openObject({
    ...SAMPLING,
    prompt: { anyOf: [string(), array(string()), TOKEN_LIST, array(TOKEN_LIST)] },
    logprobs: integer('top log-probabilities per token'), echo: boolean(), suffix: string(), best_of: integer(),
  }, ['prompt'], CACHE_SALT_NOTE),
  TextCompletion: openObject({
    id: string(), object: constant('text_completion'), created: integer(), model: string(),
    choices: array(openObject({ index: integer(), text: string(), logprobs: nullable({ type: 'object' }), finish_reason: FINISH_REASON }, ['index', 'text', 'finish_reason'])),
    usage: ref('CompletionUsage'),
  }, ['id', 'object', 'created', 'model', 'choices', 'usage']),
  TextCompletionChunk: openObject({
    id: string(), object: constant('text_completion'), created: integer(), model: string(),
    choices: array(openObject({ index: integer(), text: string(), logprobs: nullable({ type: 'object' }), finish_reason: nullable(FINISH_REASON) }, ['index', 'text', 'finish_reason'])),
    usage: nullable(ref('CompletionUsage')),
  }, ['id', 'object', 'created', 'model', 'choices']),
  TextCompletionStreamEvent: { anyOf: [ref('TextCompletionChunk'), ref('Error')], description: 'A completion stream\'s `data:` line: a chunk or, on a failure after the start, an error body.' },
  CompletionUsage: openObject({
    prompt_tokens: integer(), completion_tokens: integer(), total_tokens: integer(),
    prompt_tokens_details: nullable(openObject({ cached_tokens: integer() }, [])),
    completion_tokens_details: nullable({ type: 'object' }),
  }, ['prompt_tokens', 'completion_tokens', 'total_tokens']),
  EmbeddingRequest: openObject({
    model: string('optional; when sent it must name the endpoint\'s model'),
    input: { anyOf: [string(), array(string()), TOKEN_LIST, array(TOKEN_LIST)] },
    encoding_format: oneOfStrings(['float', 'base64']), dimensions: integer(), user: string(),
  }, ['input'], '`cache_salt` is refused (400).'),
  EmbeddingList: openObject({
    object: constant('list'),
    data: array(openObject({
      object: constant('embedding'), index: integer(),
      embedding: { anyOf: [array(number()), string('base64 of little-endian float32s')] },
    }, ['object', 'index', 'embedding'])),
    model: string(),
    usage: openObject({ prompt_tokens: integer(), total_tokens: integer() }, ['prompt_tokens', 'total_tokens']),
  }, ['object', 'data', 'model', 'usage']),
  Model: closedObject({
    id: string(), object: constant('model'), created: integer(), owned_by: string('the owning workspace\'s id'),
    engine: constant(STAND_IN_ENGINE_LABEL), note: string('why the answers are placeholder words'),
    root: string('a LoRA adapter\'s base model'), parent: string('a LoRA adapter\'s base model (vLLM\'s field)'),
  }, ['id', 'object', 'created', 'owned_by'], 'The endpoint\'s model, then the LoRA adapters attached to it (docs/adapters.md: `id` the adapter\'s name, `parent` its base model). `engine` and `note` are present only when the built-in CPU stand-in answers for it.'),
  ModelList: closedObject({ object: constant('list'), data: array(ref('Model')) }),
  WorkspaceModel: closedObject({
    id: string('the deployment\'s slug'), object: constant('model'), created: integer(), owned_by: string('the workspace\'s id'),
    root: string('the catalog model it serves'), engine: constant(STAND_IN_ENGINE_LABEL), note: string(),
    parent: string('a LoRA adapter\'s base model (vLLM\'s field)'),
  }, ['id', 'object', 'created', 'owned_by', 'root'], 'A deployment of the workspace, on the workspace base URL, or a LoRA adapter attached to one (`id` its name, `parent` its base model).'),
  WorkspaceModelList: closedObject({ object: constant('list'), data: array(ref('WorkspaceModel')) }),
  SharedResponsesRequest: {
    allOf: [ref('ResponsesRequest'), { type: 'object', required: ['model'], properties: { model: { type: 'string', pattern: '^shared/', description: '`shared/<model-id>`' } } }],
  },
  SharedChatCompletionRequest: {
    allOf: [ref('ChatCompletionRequest'), { type: 'object', required: ['model'], properties: { model: { type: 'string', pattern: '^shared/', description: '`shared/<model-id>`' } } }],
  },
  SharedModel: closedObject({
    id: { type: 'string', pattern: '^shared/' }, object: constant('model'), created: integer('always 0: a catalog entry'), owned_by: constant('shared'),
    pricing: closedObject({ input_per_million: string('USD per 1M input tokens, an exact decimal'), output_per_million: string(), currency: constant('USD') }),
    availability: oneOfStrings(['Available', 'Degraded', 'Unavailable']),
    engine: constant(STAND_IN_ENGINE_LABEL), note: string(),
  }, ['id', 'object', 'created', 'owned_by', 'pricing', 'availability']),
  SharedModelList: closedObject({ object: constant('list'), data: array(ref('SharedModel')) }),
};
