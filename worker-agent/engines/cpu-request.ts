/**
 * Validates an OpenAI-style request for the CPU engine and decides what each choice is made
 * from; the text itself is made as it is sent (cpu-text-generator.ts), so a long answer costs
 * memory only for what is in flight.
 */
import { randomBytes } from 'node:crypto';
import type { CpuEngineBehaviour, CpuEngineOptions } from './cpu-engine-options';
import { countTokens } from './cpu-tokenizer';
import type { ChoiceRequest } from './cpu-choice-request';
import { answerShapeOf, type AnswerShape } from './cpu-answer-shape';
import { structuredAnswer } from './cpu-structured-answer';
import { isObject, type EngineRoutePath } from './engine-request';
import { promptTextOf } from './prompt-text';
import { integerField, invalidRequestFailure, numberField, type CompletionHeader } from './request-fields';

const DEFAULT_MAX_TOKENS = 16;
/**
 * Without `max_tokens`, a JSON or tool-call answer is given room to finish, as a model's would
 * (its size is set by the schema, not by a budget): the AI SDK's generateObject and the Agents
 * SDK send no limit, and 16 tokens cut their JSON. Text keeps the short stand-in default.
 */
const DEFAULT_STRUCTURED_MAX_TOKENS = 4_096;
const MAX_MAX_TOKENS = 65_536;
const MAX_CHOICES = 128;
const DEFAULT_MODEL = 'cpu';

export interface CpuCompletionPlan extends CompletionHeader {
  /** Every prompt as one text, for the agent's usage estimate should usage ever be missing. */
  readonly promptText: string;
  /** Each prompt on its own (a chat's one, a completions batch's several): what a prefix cache keys. */
  readonly prompts: readonly string[];
  /** In answer order: prompt i's choice j is at index i·n + j. */
  readonly choices: readonly ChoiceRequest[];
  readonly promptTokens: number;
  readonly behaviour: CpuEngineBehaviour;
  /** The prefix-cache tenant (cache-tenant.ts): the prompts reuse only blocks cached under it. */
  readonly cacheSalt: string;
}

/**
 * Throws `EngineFailure('engine_rejected')` carrying a 400 OpenAI error body, as an HTTP engine would.
 * `cacheSalt`: the job's tenant in the agent; served over HTTP, the body's `cache_salt`, as vLLM reads it.
 */
export function planCpuCompletion(payload: Record<string, unknown>, path: EngineRoutePath, options: CpuEngineOptions, cacheSalt = saltField(payload)): CpuCompletionPlan {
  const kind = path === '/v1/chat/completions' ? 'chat' : 'completion';
  if (kind === 'chat' && (!Array.isArray(payload.messages) || payload.messages.length === 0)) {
    throw invalidRequestFailure('messages', '`messages` must be a non-empty array', 'missing_required_parameter');
  }
  if (kind === 'completion' && typeof payload.prompt !== 'string' && !(isStringArray(payload.prompt) && payload.prompt.length > 0)) {
    throw invalidRequestFailure('prompt', '`prompt` must be a string or a non-empty array of strings', 'missing_required_parameter');
  }
  const askedMaxTokens = integerField(payload, kind === 'chat' && payload.max_completion_tokens !== undefined ? 'max_completion_tokens' : 'max_tokens', 1, MAX_MAX_TOKENS);
  const n = integerField(payload, 'n', 1, MAX_CHOICES) ?? 1;
  const seed = integerField(payload, 'seed', Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER) ?? 0;
  if (payload.model !== undefined && typeof payload.model !== 'string') throw invalidRequestFailure('model', '`model` must be a string');
  // A completions batch is answered as OpenAI does: `n` choices per prompt, prompt i's choice j
  // at index i·n + j, and the usage of all of them together.
  const prompts = kind === 'chat' ? [promptTextOf(payload, path)] : ([] as string[]).concat(payload.prompt as string | string[]);
  if (prompts.length * n > MAX_CHOICES) {
    throw invalidRequestFailure('n', `the cpu engine answers at most ${MAX_CHOICES} choices per request (prompts × n); asked for ${prompts.length * n}`);
  }
  const stop = stopSequences(payload.stop);
  const shape: AnswerShape = kind === 'chat' ? answerShapeOf(payload) : { kind: 'text', sentence: false };
  const topLogprobs = kind === 'chat' ? logprobsOf(payload, shape) : null;
  const maxTokens = askedMaxTokens ?? (shape.kind === 'text' ? DEFAULT_MAX_TOKENS : DEFAULT_STRUCTURED_MAX_TOKENS);
  const choices = prompts.flatMap((promptText, promptIndex) => Array.from({ length: n }, (_, choice): ChoiceRequest => {
    const choiceIndex = promptIndex * n + choice;
    const structured = structuredAnswer(shape, seed, choiceIndex, promptText);
    return { promptText, seed, maxTokens, stop, choiceIndex, topLogprobs, ...(shape.kind === 'text' && shape.sentence ? { sentence: true } : {}), ...(structured ? { structured } : {}) };
  }));
  const promptText = promptTextOf(payload, path);
  const promptTokens = prompts.reduce((sum, prompt) => sum + countTokens(prompt), 0);
  const streamOptions = isObject(payload.stream_options) ? payload.stream_options : {};
  return {
    kind,
    id: `${kind === 'chat' ? 'chatcmpl' : 'cmpl'}-${randomBytes(12).toString('hex')}`,
    created: Math.floor(Date.now() / 1000),
    model: (payload.model as string | undefined) ?? DEFAULT_MODEL,
    stream: payload.stream === true,
    includeUsage: payload.stream === true && streamOptions.include_usage === true,
    promptText,
    prompts,
    choices,
    promptTokens,
    behaviour: behaviourOf(payload, options),
    cacheSalt,
  };
}

/**
 * Chat's `logprobs` / `top_logprobs`: the `top_logprobs` count when asked (0 without it), null
 * when not. The engine knows the odds only of the words it draws; JSON and tool calls are
 * made by the schema generator, whose choices are not a token distribution, so logprobs with
 * them are refused by name rather than made up.
 */
function logprobsOf(payload: Record<string, unknown>, shape: AnswerShape): number | null {
  if (payload.logprobs === undefined || payload.logprobs === null || payload.logprobs === false) return null;
  if (payload.logprobs !== true) throw invalidRequestFailure('logprobs', '`logprobs` must be a boolean');
  if (shape.kind !== 'text') {
    throw invalidRequestFailure('logprobs', `the cpu engine gives logprobs for text answers only, not for ${shape.kind === 'json' ? 'response_format JSON' : 'tool calls'}`, 'unsupported_parameter');
  }
  return integerField(payload, 'top_logprobs', 0, 20) ?? 0;
}

/** vLLM's rule for `cache_salt`: absent, or a non-empty string. */
function saltField(payload: Record<string, unknown>): string {
  const salt = payload.cache_salt;
  if (salt === undefined || salt === null) return '';
  if (typeof salt !== 'string' || salt.length === 0) throw invalidRequestFailure('cache_salt', "Parameter 'cache_salt' must be a non-empty string if provided.");
  return salt;
}

function behaviourOf(payload: Record<string, unknown>, options: CpuEngineOptions): CpuEngineBehaviour {
  if (!options.testControls || !isObject(payload.cpu_engine)) return options;
  const overrides = payload.cpu_engine;
  return {
    ttftMs: integerField(overrides, 'ttft_ms', 0) ?? options.ttftMs,
    tokensPerSecond: numberField(overrides, 'tokens_per_second', 0) ?? options.tokensPerSecond,
    failAfterTokens: integerField(overrides, 'fail_after_tokens', 0) ?? options.failAfterTokens,
    crashAfterTokens: integerField(overrides, 'crash_after_tokens', 0) ?? options.crashAfterTokens,
  };
}

function stopSequences(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  if (typeof stop === 'string') return [stop];
  if (isStringArray(stop)) return stop;
  throw invalidRequestFailure('stop', '`stop` must be a string or an array of strings');
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}

