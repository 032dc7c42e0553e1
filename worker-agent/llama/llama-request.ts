/**
 * Reads an OpenAI chat/completions body for the llama.cpp engine: what to generate, how to
 * sample it, and when to stop. Parameters llama.cpp has no equivalent for are refused with a
 * 400 that names the field (as vLLM does), never silently ignored; unknown fields are ignored
 * like any OpenAI-compatible server does.
 */
import { randomBytes, randomInt } from 'node:crypto';
import { isObject, type EngineRoutePath } from '../engines/engine-request';
import { integerField, invalidRequestFailure, numberField, type CompletionHeader } from '../engines/request-fields';
import { toGrammarSchema, type GrammarSchema } from './grammar-schema';
import { planTools, renderToolCalls, toolPrompt, type ToolPlan } from './llama-tools';

/** OpenAI's default for the legacy completions endpoint; chat defaults to the rest of the context. */
const DEFAULT_COMPLETION_MAX_TOKENS = 16;
const MAX_STOP_SEQUENCES = 4;
const SEED_RANGE = 2 ** 32;

export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant';
  readonly content: string;
}

/** A completion prompt: text, or token ids as OpenAI's API allows. */
export type CompletionPrompt = { readonly text: string } | { readonly tokens: readonly number[] };

export interface SamplingSettings {
  /** 0 = greedy. */
  readonly temperature: number;
  readonly topP: number;
  /** 0 = off (OpenAI has no top_k; vLLM's extension field sets it). */
  readonly topK: number;
  readonly minP: number;
  /** Seed of the first choice; choice i uses seed + i (mod 2^32), so choices differ but repeat. */
  readonly seed: number;
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
  /** vLLM's multiplicative `repetition_penalty`; 1 = off. */
  readonly repetitionPenalty: number;
  /** Token id → value added to its logit (OpenAI `logit_bias`, -100…100). */
  readonly logitBias: ReadonlyMap<number, number>;
}

/**
 * What the answer must be: free text; JSON of a schema (`response_format`); or tool calls
 * or text (`tools`, llama-tools.ts). The last two are generated under a grammar.
 */
export type OutputConstraint =
  | { readonly kind: 'text' }
  | { readonly kind: 'json'; readonly schema: GrammarSchema }
  | { readonly kind: 'tools'; readonly tools: ToolPlan };

/** `response_format: {"type": "json_object"}`: any JSON object. */
const ANY_OBJECT: GrammarSchema = { type: 'object', additionalProperties: true };

export interface LlamaRequestPlan extends CompletionHeader {
  /** Chat: the conversation. */
  readonly messages: readonly ChatMessage[];
  /** Completions: one or more prompts; each gets `n` choices. */
  readonly prompts: readonly CompletionPrompt[];
  readonly n: number;
  /** Undefined: until the context is full (chat) — completions default to 16. */
  readonly maxTokens: number | undefined;
  readonly stop: readonly string[];
  /** Completions: prefix each choice with its prompt. */
  readonly echo: boolean;
  readonly sampling: SamplingSettings;
  readonly output: OutputConstraint;
}

export function planLlamaRequest(payload: Record<string, unknown>, path: EngineRoutePath): LlamaRequestPlan {
  const kind = path === '/v1/chat/completions' ? 'chat' : 'completion';
  refuseUnsupported(payload, kind);
  const output = kind === 'chat' ? outputConstraint(payload) : { kind: 'text' as const };
  const conversation = kind === 'chat' ? chatMessages(payload.messages) : [];
  const messages = output.kind === 'tools' ? withToolPrompt(conversation, toolPrompt(output.tools)) : conversation;
  const prompts = kind === 'completion' ? completionPrompts(payload.prompt) : [];
  const maxTokensField = kind === 'chat' && payload.max_completion_tokens !== undefined && payload.max_completion_tokens !== null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = integerField(payload, maxTokensField, 1, Number.MAX_SAFE_INTEGER) ?? (kind === 'completion' ? DEFAULT_COMPLETION_MAX_TOKENS : undefined);
  const n = integerField(payload, 'n', 1, 128) ?? 1;
  const bestOf = integerField(payload, 'best_of', 1, 128);
  if (bestOf !== undefined && bestOf !== n) refuse('best_of', '`best_of` is not supported by the llama-cpp engine (only best_of = n)');
  if (payload.model !== undefined && typeof payload.model !== 'string') invalid('model', '`model` must be a string');
  const streamOptions = isObject(payload.stream_options) ? payload.stream_options : {};
  const seed = integerField(payload, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  return {
    kind,
    id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`,
    created: Math.floor(Date.now() / 1000),
    model: (payload.model as string | undefined) ?? 'llama-cpp',
    stream: payload.stream === true,
    includeUsage: payload.stream === true && streamOptions.include_usage === true,
    messages,
    prompts,
    n,
    maxTokens,
    stop: stopSequences(payload.stop),
    echo: kind === 'completion' && boolean(payload, 'echo'),
    sampling: {
      temperature: numberField(payload, 'temperature', 0, 2) ?? 1,
      topP: numberField(payload, 'top_p', 0, 1) ?? 1,
      topK: Math.max(0, integerField(payload, 'top_k', -1, 1_000_000) ?? 0),
      minP: numberField(payload, 'min_p', 0, 1) ?? 0,
      seed: seed === undefined ? randomInt(SEED_RANGE) : ((seed % SEED_RANGE) + SEED_RANGE) % SEED_RANGE,
      presencePenalty: numberField(payload, 'presence_penalty', -2, 2) ?? 0,
      frequencyPenalty: numberField(payload, 'frequency_penalty', -2, 2) ?? 0,
      repetitionPenalty: numberField(payload, 'repetition_penalty', 0.01, 10) ?? 1,
      logitBias: logitBias(payload.logit_bias),
    },
    output,
  };
}

function outputConstraint(payload: Record<string, unknown>): OutputConstraint {
  const tools = planTools(payload);
  const format = payload.response_format;
  if (format === undefined || format === null) return tools ? { kind: 'tools', tools } : { kind: 'text' };
  if (!isObject(format) || typeof format.type !== 'string') invalid('response_format', '`response_format` must be {"type": "text" | "json_object" | "json_schema", ...}');
  if (format.type === 'text') return tools ? { kind: 'tools', tools } : { kind: 'text' };
  // One grammar per answer: JSON of the schema, or calls (whose text alternative would have to be that JSON).
  if (tools) refuse('response_format', 'the llama-cpp engine does not combine `response_format` with tool calls; use `tool_choice: "none"` or drop `response_format`');
  if (format.type === 'json_object') return { kind: 'json', schema: ANY_OBJECT };
  if (format.type !== 'json_schema') invalid('response_format.type', '`response_format.type` must be one of text, json_object, json_schema');
  const jsonSchema = format.json_schema;
  if (!isObject(jsonSchema) || !isObject(jsonSchema.schema)) {
    invalid('response_format.json_schema.schema', '`response_format.json_schema.schema` must be a JSON Schema object', 'missing_required_parameter');
  }
  return { kind: 'json', schema: toGrammarSchema(jsonSchema.schema, 'response_format.json_schema.schema') };
}

/** The tools' prompt joins the first system message, or opens the conversation as one. */
function withToolPrompt(messages: readonly ChatMessage[], prompt: string): ChatMessage[] {
  if (messages[0]?.role === 'system') return [{ role: 'system', content: `${messages[0].content}\n\n${prompt}` }, ...messages.slice(1)];
  return [{ role: 'system', content: prompt }, ...messages];
}

/** The seed of choice `index`: distinct per choice, reproducible per request seed. */
export function choiceSeed(sampling: SamplingSettings, index: number): number {
  return (sampling.seed + index) % SEED_RANGE;
}


function invalid(param: string, message: string, code?: string): never {
  throw invalidRequestFailure(param, message, code);
}

function refuse(param: string, message: string): never {
  throw invalidRequestFailure(param, message, 'unsupported_parameter');
}

/** Features with no llama.cpp mapping in this adapter: a clear 400 beats a silently different answer. */
function refuseUnsupported(payload: Record<string, unknown>, kind: 'chat' | 'completion'): void {
  const present = (name: string) => payload[name] !== undefined && payload[name] !== null && payload[name] !== false;
  if (kind === 'chat' && present('logprobs')) refuse('logprobs', '`logprobs` is not supported by the llama-cpp engine');
  if (kind === 'completion' && present('logprobs') && payload.logprobs !== 0) refuse('logprobs', '`logprobs` is not supported by the llama-cpp engine');
  if (present('top_logprobs') && payload.top_logprobs !== 0) refuse('top_logprobs', '`top_logprobs` is not supported by the llama-cpp engine');
  if (kind === 'completion') {
    // Chat fields the legacy endpoint has no place for; their harmless values pass, as before.
    const harmless = { tools: Array.isArray(payload.tools) && payload.tools.length === 0, tool_choice: payload.tool_choice === 'none',
      response_format: isObject(payload.response_format) && payload.response_format.type === 'text' };
    for (const [name, isHarmless] of Object.entries(harmless)) {
      if (present(name) && !isHarmless) refuse(name, `\`${name}\` is a chat/completions field; /v1/completions on the llama-cpp engine does not take it`);
    }
  }
  if (Array.isArray(payload.functions) ? payload.functions.length > 0 : present('functions')) refuse('functions', 'the deprecated `functions` field is not supported by the llama-cpp engine; use `tools`');
  if (present('function_call') && payload.function_call !== 'none') refuse('function_call', 'the deprecated `function_call` field is not supported by the llama-cpp engine; use `tool_choice`');
  if (typeof payload.suffix === 'string' ? payload.suffix.length > 0 : present('suffix')) refuse('suffix', '`suffix` is not supported by the llama-cpp engine');
  if (Array.isArray(payload.modalities) && payload.modalities.some((modality) => modality !== 'text')) refuse('modalities', 'the llama-cpp engine produces text only');
  if (present('audio')) refuse('audio', 'the llama-cpp engine produces text only');
}

function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) invalid('messages', '`messages` must be a non-empty array', 'missing_required_parameter');
  /** Names of the calls earlier assistant turns made, for the tool results that answer them. */
  const calledNames = new Map<string, string>();
  return value.map((message, index): ChatMessage => {
    const param = `messages[${index}]`;
    if (!isObject(message)) invalid(param, `\`${param}\` must be an object`);
    const role = message.role === 'developer' ? 'system' : message.role;
    if (role === 'function') refuse(`${param}.role`, '`function` messages (the deprecated function calling) are not supported by the llama-cpp engine; use `tool`');
    if (role === 'tool') {
      const id = message.tool_call_id;
      if (typeof id !== 'string' || id.length === 0) invalid(`${param}.tool_call_id`, '`tool_call_id` must name the call this message answers', 'missing_required_parameter');
      // Chat templates here have no tool turn: the result is a user turn that says what it answers.
      const name = calledNames.get(id);
      return { role: 'user', content: `Result of ${name ? `${name} ` : ''}(call ${id}):\n${messageText(message.content, `${param}.content`, false)}` };
    }
    if (role !== 'system' && role !== 'user' && role !== 'assistant') {
      invalid(`${param}.role`, `\`${param}.role\` must be one of system, developer, user, assistant, tool`);
    }
    const content = messageText(message.content, `${param}.content`, role === 'assistant');
    if (role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
      const calls = message.tool_calls.map((call, callIndex) => {
        const callParam = `${param}.tool_calls[${callIndex}]`;
        if (!isObject(call) || !isObject(call.function) || typeof call.function.name !== 'string' || typeof call.function.arguments !== 'string') {
          invalid(callParam, `\`${callParam}\` must be {"id": "...", "type": "function", "function": {"name": "...", "arguments": "..."}}`);
        }
        if (typeof call.id === 'string') calledNames.set(call.id, call.function.name);
        return { name: call.function.name, arguments: call.function.arguments };
      });
      return { role, content: content ? `${content}\n${renderToolCalls(calls)}` : renderToolCalls(calls) };
    }
    return { role, content };
  });
}

function messageText(content: unknown, param: string, nullable: boolean): string {
  if (typeof content === 'string') return content;
  if ((content === null || content === undefined) && nullable) return '';
  if (!Array.isArray(content)) invalid(param, `\`${param}\` must be a string or an array of content parts`);
  return content.map((part, index) => {
    if (isObject(part) && part.type === 'text' && typeof part.text === 'string') return part.text;
    if (isObject(part) && typeof part.type === 'string' && part.type !== 'text') {
      refuse(`${param}[${index}]`, `content parts of type \`${part.type}\` are not supported by the llama-cpp engine (text only)`);
    }
    return invalid(`${param}[${index}]`, `\`${param}[${index}]\` must be {"type": "text", "text": "..."}`);
  }).join('\n');
}

function completionPrompts(prompt: unknown): CompletionPrompt[] {
  const message = '`prompt` must be a string, an array of strings, an array of token ids or an array of such arrays';
  const isTokens = (value: unknown): value is number[] => Array.isArray(value) && value.length > 0 && value.every((item) => Number.isInteger(item) && item >= 0);
  if (typeof prompt === 'string') return [{ text: prompt }];
  if (isTokens(prompt)) return [{ tokens: prompt }];
  if (!Array.isArray(prompt) || prompt.length === 0) invalid('prompt', message, 'missing_required_parameter');
  return prompt.map((item) => {
    if (typeof item === 'string') return { text: item };
    if (isTokens(item)) return { tokens: item };
    return invalid('prompt', message);
  });
}

function stopSequences(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === 'string' ? [stop] : stop;
  if (!Array.isArray(list) || !list.every((item) => typeof item === 'string')) invalid('stop', '`stop` must be a string or an array of strings');
  if (list.length > MAX_STOP_SEQUENCES) invalid('stop', `\`stop\` takes at most ${MAX_STOP_SEQUENCES} sequences`);
  return list.filter((item) => item.length > 0);
}

function logitBias(value: unknown): Map<number, number> {
  const biases = new Map<number, number>();
  if (value === undefined || value === null) return biases;
  if (!isObject(value)) invalid('logit_bias', '`logit_bias` must map token ids to numbers from -100 to 100');
  for (const [token, bias] of Object.entries(value)) {
    if (!/^\d+$/.test(token) || typeof bias !== 'number' || !(bias >= -100 && bias <= 100)) {
      invalid('logit_bias', '`logit_bias` must map token ids to numbers from -100 to 100');
    }
    biases.set(Number(token), bias);
  }
  return biases;
}



function boolean(source: Record<string, unknown>, name: string): boolean {
  const value = source[name];
  if (value === undefined || value === null) return false;
  if (typeof value !== 'boolean') invalid(name, `\`${name}\` must be a boolean`);
  return value;
}
